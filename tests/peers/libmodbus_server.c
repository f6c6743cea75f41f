/*
 * A Modbus TCP server built on libmodbus, used as a real peer by the engine's
 * integration tests (see engine/tests/support/peers.rs).
 *
 *   libmodbus_server PORT
 *
 * Listens on 127.0.0.1:PORT only. Every table holds addresses 0..199 with
 * values the tests know in advance:
 *
 *   holding register i  = i*3+1
 *   input register i    = 1000+i
 *   coil i              = i%2
 *   discrete input i    = (i%3 == 0)
 *
 * Requests outside 0..199 get exception 2 (illegal data address) from
 * libmodbus itself. Clients are served one at a time; a client error only ends
 * that client's session. SIGTERM or SIGINT ends the process with status 0.
 */
#include <errno.h>
#include <modbus.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define START 0
#define COUNT 200

static volatile sig_atomic_t stop_requested = 0;
/* Sockets the signal handler shuts down; -1 when there is none. */
static volatile sig_atomic_t listen_sock = -1;
static volatile sig_atomic_t client_sock = -1;

/*
 * libmodbus retries select() on EINTR, so a flag alone would not wake a
 * server blocked waiting for a client's next request. Shutting the sockets
 * down (shutdown() is async-signal-safe) makes the blocked call return at
 * once: accept() fails, and the client's read sees end-of-stream.
 */
static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
    if (listen_sock >= 0) {
        shutdown(listen_sock, SHUT_RDWR);
    }
    if (client_sock >= 0) {
        shutdown(client_sock, SHUT_RDWR);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "bad port: %s\n", argv[1]);
        return 2;
    }

    /* A client vanishing mid-reply must not kill the server. */
    signal(SIGPIPE, SIG_IGN);

    modbus_mapping_t *map = modbus_mapping_new_start_address(
        START, COUNT,  /* coils */
        START, COUNT,  /* discrete inputs */
        START, COUNT,  /* holding registers */
        START, COUNT); /* input registers */
    if (map == NULL) {
        fprintf(stderr, "mapping: %s\n", modbus_strerror(errno));
        return 1;
    }
    for (int i = 0; i < COUNT; i++) {
        map->tab_registers[i] = (uint16_t)(i * 3 + 1);
        map->tab_input_registers[i] = (uint16_t)(1000 + i);
        map->tab_bits[i] = (uint8_t)(i % 2);
        map->tab_input_bits[i] = (uint8_t)(i % 3 == 0);
    }

    modbus_t *ctx = modbus_new_tcp("127.0.0.1", port);
    if (ctx == NULL) {
        fprintf(stderr, "context: %s\n", modbus_strerror(errno));
        modbus_mapping_free(map);
        return 1;
    }
    int listen_fd = modbus_tcp_listen(ctx, 1);
    if (listen_fd == -1) {
        fprintf(stderr, "listen on 127.0.0.1:%d: %s\n", port, modbus_strerror(errno));
        modbus_free(ctx);
        modbus_mapping_free(map);
        return 1;
    }
    listen_sock = listen_fd;

    /* Installed only now that there is a socket to shut down. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    fprintf(stderr, "listening on 127.0.0.1:%d\n", port);

    uint8_t query[MODBUS_TCP_MAX_ADU_LENGTH];
    while (!stop_requested) {
        /* modbus_tcp_accept stores the client socket in ctx. */
        int client_fd = modbus_tcp_accept(ctx, &listen_fd);
        if (client_fd == -1) {
            if (stop_requested) {
                break;
            }
            fprintf(stderr, "accept: %s\n", modbus_strerror(errno));
            /* Avoid a busy loop if accept keeps failing (e.g. EMFILE). */
            usleep(10000);
            continue;
        }
        client_sock = client_fd;
        /* A signal that came just before the assignment found no client to
         * shut down; do it here instead. */
        if (stop_requested) {
            shutdown(client_fd, SHUT_RDWR);
        }
        for (;;) {
            int len = modbus_receive(ctx, query);
            if (len > 0) {
                /* Builds the reply, or an exception for bad addresses. */
                if (modbus_reply(ctx, query, len, map) == -1) {
                    break;
                }
            } else if (len == -1) {
                /* Disconnect, signal or a malformed frame: end this client. */
                break;
            }
            /* len == 0: libmodbus chose to ignore the request; wait for the
             * next one. (Over TCP every unit id is answered.) */
        }
        client_sock = -1;
        close(client_fd);
        modbus_set_socket(ctx, -1);
    }

    fprintf(stderr, "stopping\n");
    listen_sock = -1;
    close(listen_fd);
    modbus_free(ctx);
    modbus_mapping_free(map);
    return 0;
}
