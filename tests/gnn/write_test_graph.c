/* write_test_graph.c: writes a small planted-partition graph (gnn_testutil)
 * to a .tmag file for the shell tests.
 *   write_test_graph OUT.tmag NODES FEATURE_DIM SPARSE SEED */
#include "tma_test.h"
#include "gnn_testutil.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: write_test_graph OUT.tmag NODES FEATURE_DIM SPARSE SEED\n");
        return 2;
    }
    gnn_test_graph_opts_t o;
    gnn_test_graph_defaults(&o);
    o.nodes = atoll(argv[2]);
    o.feature_dim = atoi(argv[3]);
    o.sparse = atoi(argv[4]);
    o.seed = (uint64_t)atoll(argv[5]);
    o.communities = 10;
    o.avg_degree = 10;
    o.val = o.test = o.nodes / 10;
    tma_graph_t *g = gnn_test_graph(&o);
    CHECK_OK(tma_graph_write(g, argv[1]));
    tma_graph_destroy(g);
    return tma_test_done();
}
