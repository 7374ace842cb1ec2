/*
 * reach.c: why an address may not be reachable over UCX from this host: the
 * local interface the route to it leaves by, and whether the UCX settings
 * of this process rule that interface out (UCX_NET_DEVICES lists the
 * devices UCX may use; "all" or unset allows every one).  Both roles put
 * this sentence into the error they give when nobody connects.
 */
#include "transport_int.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The interface holding the local address this host sends from to reach
 * host (a UDP "connection" picks the route and sends nothing). */
static int route_interface(const char *host, char *ifname, size_t cap)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, "9", &hints, &ai) != 0 || !ai)
        return -1;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in local;
    socklen_t len = sizeof local;
    int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&local, &len) == 0;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    if (!ok)
        return -1;
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return -1;
    int found = -1;
    for (struct ifaddrs *i = ifa; i && found < 0; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == local.sin_addr.s_addr) {
            snprintf(ifname, cap, "%s", i->ifa_name);
            found = 0;
        }
    }
    freeifaddrs(ifa);
    return found;
}

/* Whether the comma-separated UCX device list allows the network
 * interface (entries name a device, optionally with ":port"). */
static int devices_allow(const char *list, const char *ifname)
{
    size_t n = strlen(ifname);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if ((len == 3 && strncmp(p, "all", 3) == 0) ||
            (len >= n && strncmp(p, ifname, n) == 0 && (len == n || p[n] == ':')))
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

int tma_transport_explain_route(const char *addr, char *out, size_t cap)
{
    char host[256];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    char ifname[IF_NAMESIZE + 1];
    if (route_interface(host, ifname, sizeof ifname) != 0) {
        snprintf(out, cap, "%s has no route from this host", host);
        return 0;
    }
    const char *devs = getenv("UCX_NET_DEVICES");
    if (devs && *devs && !devices_allow(devs, ifname)) {
        snprintf(out, cap,
                 "%s is reached through interface %s here, and UCX_NET_DEVICES=%s rules that interface out "
                 "(add %s to it, or set transport.host to an address on a device it lists)",
                 host, ifname, devs, ifname);
        return 1;
    }
    snprintf(out, cap, "%s is reached through interface %s here (UCX_NET_DEVICES=%s)", host, ifname,
             devs && *devs ? devs : "all");
    return 0;
}
