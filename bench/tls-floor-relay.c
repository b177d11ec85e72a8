/*
 * The TLS floor of the CPU benchmark (bench/cpu.ts, `--cpu --tls`, row `floor-tls`): a minimal
 * single-threaded epoll relay, OpenSSL (Debian's libssl) on the client side, plain TCP to the
 * upstream. What any TLS-terminating relay on this machine must at least pay per byte: the
 * handshake, AES-GCM both ways, loopback TCP, nothing else (no HTTP, no allocation per read).
 *
 * The bench compiles it at bench time into a temp folder (bench/tls-floor.ts):
 *   cc -O2 -o tls-floor-relay tls-floor-relay.c -lssl -lcrypto
 * and runs
 *   tls-floor-relay CERT.pem KEY.pem LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT
 * It listens on 127.0.0.1:LISTEN_PORT (0: a free port) and prints
 * "tls floor relay listening on https://127.0.0.1:N".
 *
 * Each connection has one 256 KiB buffer per direction. TLS -> plain: records are decrypted with
 * SSL_read until the buffer is full or the socket has no more, then leave in one write(). Plain ->
 * TLS: one read() of up to 256 KiB, SSL_write()n as 16 KiB records. The client's EOF is passed on
 * as shutdown(SHUT_WR) upstream; the upstream's EOF (once its bytes are out) or any error closes
 * both sides, as the bare Node relay's pipe() does. Loopback only; never for production.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (256 * 1024)

struct conn;
struct end { struct conn *c; int fd; int client; };
struct conn {
  struct end cl, up;
  SSL *ssl;
  int handshaken, cl_eof, up_eof, up_shut, up_removed, dead;
  int ssl_want_read, ssl_want_write; /* what the last blocked SSL call waits for */
  size_t c2u_off, c2u_len, u2c_off, u2c_len;
  unsigned cl_mask, up_mask;
  struct conn *next_dead;
  unsigned char c2u[BUF], u2c[BUF];
};

static int ep;
static struct conn *dead_list;

static void die(const char *what) { perror(what); exit(1); }

static void nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void nodelay(int fd) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }

static void kill_conn(struct conn *c) {
  if (c->dead) return;
  c->dead = 1;
  close(c->cl.fd);
  close(c->up.fd);
  SSL_free(c->ssl);
  c->next_dead = dead_list; /* freed after this epoll batch: later events may still point at it */
  dead_list = c;
}

static void set_mask(struct end *e, unsigned *cur, unsigned want) {
  if (*cur == want) return;
  struct epoll_event ev = { .events = want, .data.ptr = e };
  if (epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev) < 0) die("epoll_ctl mod");
  *cur = want;
}

/* Record why an SSL call stopped; returns 0 to block, -1 on EOF/error (sets cl_eof or kills). */
static int ssl_blocked(struct conn *c, int r) {
  int err = SSL_get_error(c->ssl, r);
  if (err == SSL_ERROR_WANT_READ) { c->ssl_want_read = 1; return 0; }
  if (err == SSL_ERROR_WANT_WRITE) { c->ssl_want_write = 1; return 0; }
  ERR_clear_error();
  return -1;
}

/* Move every byte that can move now, then set both sockets' epoll interest. */
static void pump(struct conn *c) {
  int progress = 1;
  while (progress && !c->dead) {
    progress = 0;
    c->ssl_want_read = c->ssl_want_write = 0;
    if (!c->handshaken) {
      int r = SSL_accept(c->ssl);
      if (r == 1) { c->handshaken = 1; progress = 1; continue; }
      if (ssl_blocked(c, r) < 0) { kill_conn(c); return; }
      break;
    }
    /* TLS -> plain: decrypt into the free tail of c2u, then one write() upstream. */
    if (c->c2u_off == c->c2u_len) c->c2u_off = c->c2u_len = 0;
    while (!c->cl_eof && c->c2u_len < BUF) {
      int r = SSL_read(c->ssl, c->c2u + c->c2u_len, (int)(BUF - c->c2u_len));
      if (r > 0) { c->c2u_len += (size_t)r; progress = 1; continue; }
      if (ssl_blocked(c, r) < 0) c->cl_eof = 1;
      break;
    }
    if (c->c2u_len > c->c2u_off) {
      ssize_t w = write(c->up.fd, c->c2u + c->c2u_off, c->c2u_len - c->c2u_off);
      if (w > 0) { c->c2u_off += (size_t)w; progress = 1; }
      else if (w < 0 && errno != EAGAIN) { kill_conn(c); return; }
    }
    if (c->cl_eof && c->c2u_off == c->c2u_len && !c->up_shut) { shutdown(c->up.fd, SHUT_WR); c->up_shut = 1; }
    /* plain -> TLS: one read() when u2c is empty, then SSL_write() it out. */
    if (c->u2c_off == c->u2c_len && !c->up_eof) {
      ssize_t r = read(c->up.fd, c->u2c, BUF);
      if (r > 0) { c->u2c_off = 0; c->u2c_len = (size_t)r; progress = 1; }
      else if (r == 0) c->up_eof = 1;
      else if (errno != EAGAIN) { kill_conn(c); return; }
    }
    while (c->u2c_len > c->u2c_off) {
      int r = SSL_write(c->ssl, c->u2c + c->u2c_off, (int)(c->u2c_len - c->u2c_off));
      if (r > 0) { c->u2c_off += (size_t)r; progress = 1; continue; }
      if (ssl_blocked(c, r) < 0) { kill_conn(c); return; }
      break;
    }
    if (c->up_eof && c->u2c_off == c->u2c_len) {
      SSL_shutdown(c->ssl); /* close_notify, best effort */
      kill_conn(c);
      return;
    }
  }
  if (c->dead) return;
  unsigned cl = 0, up = 0;
  if (c->ssl_want_read) cl |= EPOLLIN;
  if (c->ssl_want_write) cl |= EPOLLOUT;
  if (c->c2u_len > c->c2u_off) up |= EPOLLOUT;
  if (!c->up_eof && c->u2c_off == c->u2c_len) up |= EPOLLIN;
  set_mask(&c->cl, &c->cl_mask, cl);
  if (!c->up_removed) set_mask(&c->up, &c->up_mask, up);
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: %s CERT KEY LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT\n", argv[0]); return 2; }
  signal(SIGPIPE, SIG_IGN);
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, argv[1]) != 1 || SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1) {
    ERR_print_errors_fp(stderr);
    return 1;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  struct sockaddr_in upaddr = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[5])) };
  if (inet_pton(AF_INET, argv[4], &upaddr.sin_addr) != 1) { fprintf(stderr, "bad upstream host %s\n", argv[4]); return 2; }

  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
  if (listen(lfd, 512) < 0) die("listen");
  socklen_t alen = sizeof addr;
  getsockname(lfd, (struct sockaddr *)&addr, &alen);
  nonblock(lfd);
  ep = epoll_create1(0);
  struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
  printf("tls floor relay listening on https://127.0.0.1:%d\n", ntohs(addr.sin_port));
  fflush(stdout);

  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
    for (int i = 0; i < n; i++) {
      struct end *e = evs[i].data.ptr;
      if (e == NULL) {
        for (;;) {
          int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
          if (fd < 0) break;
          int ufd = socket(AF_INET, SOCK_STREAM, 0);
          /* Loopback: a blocking connect completes at once. */
          if (ufd < 0 || connect(ufd, (struct sockaddr *)&upaddr, sizeof upaddr) < 0) {
            close(fd);
            if (ufd >= 0) close(ufd);
            continue;
          }
          nonblock(ufd);
          nodelay(fd);
          nodelay(ufd);
          struct conn *c = calloc(1, sizeof *c);
          if (!c) die("calloc");
          c->cl = (struct end){ c, fd, 1 };
          c->up = (struct end){ c, ufd, 0 };
          c->ssl = SSL_new(ctx);
          SSL_set_fd(c->ssl, fd);
          c->cl_mask = EPOLLIN;
          c->up_mask = EPOLLIN;
          struct epoll_event ev1 = { .events = c->cl_mask, .data.ptr = &c->cl };
          struct epoll_event ev2 = { .events = c->up_mask, .data.ptr = &c->up };
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev1);
          epoll_ctl(ep, EPOLL_CTL_ADD, ufd, &ev2);
          pump(c);
        }
        continue;
      }
      struct conn *c = e->c;
      if (c->dead) continue;
      pump(c);
      if (c->dead) continue;
      /* EPOLLHUP is reported whatever the mask: an error, or the client gone both ways, ends the
         connection; the upstream gone both ways leaves its unread bytes to be read without epoll. */
      if ((evs[i].events & EPOLLERR) || ((evs[i].events & EPOLLHUP) && e->client)) kill_conn(c);
      else if ((evs[i].events & EPOLLHUP) && !c->up_removed) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->up.fd, NULL);
        c->up_removed = 1;
        pump(c);
      }
    }
    while (dead_list) {
      struct conn *c = dead_list;
      dead_list = c->next_dead;
      free(c);
    }
  }
}
