/*
 * ksp_splice: the zero-copy fast path of the passthrough's byte splice (proxy/splice-native.ts).
 *
 * start(clientFd, upstreamFd, onEnd, noProgressMs) dup()s both socket descriptors and runs one
 * thread that moves bytes both ways with splice(2) through a pipe per direction, so the bytes never
 * enter user space (what HAProxy's `option splice-auto` does). The sockets stay owned by Node: the
 * caller has stopped libuv from reading them and nothing is queued for writing, and the thread only
 * uses its own descriptors.
 *
 * The end never truncates (docs/half-close.md): when the first side ends (EOF, or a read error) the
 * thread reads nothing more from either side, but still writes what it already read: each pipe to
 * its destination, then shuts that destination's write side (FIN after the data). It waits while a
 * destination takes bytes, and gives up on it only when it took nothing for noProgressMs. A write
 * error on a side does not stop reading that side: what it sent before it went away still goes to
 * the other. Then the thread closes its descriptors and calls onEnd(side, bytesToUpstream,
 * bytesToClient, errno) on the main thread: side 0 = the client ended first, 1 = the upstream,
 * 2 = stopped by stop(handle), which ends the thread without waiting; errno ETIMEDOUT when a
 * destination took nothing for noProgressMs.
 *
 * unsent(fd) and peerWindow(fd): the kernel's count of bytes a socket has sent that its peer has not
 * acknowledged (SIOCOUTQ), and the receive window the peer advertised last (TCP_INFO), which grows
 * as the peer's application reads: the progress the JavaScript side's teardown waits on
 * (proxy/drain-close.ts).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#define PIPE_BYTES (1024 * 1024)
/* start() without a noProgressMs: proxy/drain-close.ts RELAY_NO_PROGRESS_MS. */
#define DEFAULT_NO_PROGRESS_MS (15 * 60 * 1000)

typedef struct {
  int fd[2];       /* our dups: 0 = client, 1 = upstream */
  int pipe[2][2];  /* pipe[d]: direction d; d = 0 client -> upstream, d = 1 upstream -> client */
  size_t cap[2];
  size_t inpipe[2];
  int cancel;      /* eventfd written by stop() */
  int64_t no_progress_ms;
  volatile uint64_t bytes[2];
  int side;
  int err;
  napi_threadsafe_function tsfn;
  pthread_t thread;
  int joined;
  napi_ref self; /* keeps the handle object (and so this struct) alive until onEnd ran */
} ksp_splice;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Write what direction d has in its pipe; returns -1 on a destination error, else bytes moved. */
static ssize_t drain_pipe(ksp_splice *s, int d) {
  if (s->inpipe[d] == 0) return 0;
  ssize_t r = splice(s->pipe[d][0], NULL, s->fd[1 - d], NULL, s->inpipe[d], SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (r > 0) {
    s->inpipe[d] -= (size_t)r;
    __atomic_add_fetch(&s->bytes[d], (uint64_t)r, __ATOMIC_RELAXED);
    return r;
  }
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  return -1;
}

static void *run(void *arg) {
  ksp_splice *s = (ksp_splice *)arg;
  int ended[2] = {0, 0}; /* reading fd[d] is over: EOF or a read error */
  int dead[2] = {0, 0};  /* direction d cannot be delivered: writing fd[1 - d] failed */
  int shut[2] = {0, 0};  /* fd[i]'s write side was shut after its pipe drained (closing) */
  int closing = 0;       /* a side ended: nothing more is read, the pipes are delivered */
  int64_t last = now_ms();
  s->side = -1;
  s->err = 0;
  for (;;) {
    int progress = 0;
    for (int d = 0; d < 2; d++) {
      if (!closing && !ended[d] && !dead[d] && s->inpipe[d] < s->cap[d]) {
        ssize_t r = splice(s->fd[d], NULL, s->pipe[d][1], NULL, s->cap[d] - s->inpipe[d], SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (r > 0) {
          s->inpipe[d] += (size_t)r;
          progress = 1;
        } else if (r == 0) {
          ended[d] = 1;
        } else if (errno != EAGAIN && errno != EINTR) {
          ended[d] = 1;
          if (!s->err) s->err = errno;
        }
      }
      if (!dead[d] && s->inpipe[d] > 0) {
        ssize_t w = drain_pipe(s, d);
        if (w < 0) {
          /* The destination is gone: what it was owed is dropped, what it sent is still read. */
          if (!s->err) s->err = errno;
          dead[d] = 1;
        } else if (w > 0) {
          progress = 1;
        }
      }
    }
    int64_t now = now_ms();
    if (progress) last = now;
    if (!closing && (ended[0] || ended[1] || (dead[0] && dead[1]))) {
      /* The first side to end decides (the client when both did in one pass). */
      s->side = ended[0] ? 0 : ended[1] ? 1 : 0;
      closing = 1;
      last = now;
    }
    if (closing) {
      int owed = 0;
      for (int d = 0; d < 2; d++) {
        if (dead[d] || s->inpipe[d] == 0) {
          /* Everything read for fd[1 - d] is written: FIN after it. */
          if (!dead[d] && !shut[1 - d]) shutdown(s->fd[1 - d], SHUT_WR);
          shut[1 - d] = 1;
        } else {
          owed = 1;
        }
      }
      if (!owed) break;
    }
    if (progress) continue;
    int timeout = -1;
    if (closing) {
      int64_t left = last + s->no_progress_ms - now;
      if (left <= 0) {
        s->err = ETIMEDOUT;
        break;
      }
      timeout = left > 1000000 ? 1000000 : (int)left;
    }
    struct pollfd p[3];
    for (int i = 0; i < 2; i++) {
      p[i].fd = s->fd[i];
      p[i].events = 0;
      p[i].revents = 0;
    }
    for (int d = 0; d < 2; d++) {
      if (!closing && !ended[d] && !dead[d] && s->inpipe[d] < s->cap[d]) p[d].events |= POLLIN;
      if (!dead[d] && s->inpipe[d] > 0) p[1 - d].events |= POLLOUT;
    }
    /* A socket neither read nor written now is not watched: its hang-up would wake poll at once,
       forever, and matters only once we read it (the read then says EOF or the error) or write it. */
    for (int i = 0; i < 2; i++)
      if (p[i].events == 0) p[i].fd = -1;
    p[2].fd = s->cancel;
    p[2].events = POLLIN;
    p[2].revents = 0;
    if (poll(p, 3, timeout) < 0 && errno != EINTR) {
      s->side = 2;
      s->err = errno;
      break;
    }
    if (p[2].revents) {
      s->side = 2;
      break;
    }
  }
  if (s->side < 0) s->side = 2;
  for (int d = 0; d < 2; d++) {
    close(s->pipe[d][0]);
    close(s->pipe[d][1]);
    close(s->fd[d]);
  }
  napi_call_threadsafe_function(s->tsfn, s, napi_tsfn_blocking);
  return NULL;
}

/* Main thread: the thread is done; join it, report, and free. */
static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
  ksp_splice *s = (ksp_splice *)data;
  (void)context;
  if (!s->joined) {
    pthread_join(s->thread, NULL);
    s->joined = 1;
  }
  close(s->cancel);
  s->cancel = -1;
  if (env != NULL && js_cb != NULL) {
    napi_value undefined, argv[4];
    napi_get_undefined(env, &undefined);
    napi_create_int32(env, s->side, &argv[0]);
    napi_create_double(env, (double)s->bytes[0], &argv[1]);
    napi_create_double(env, (double)s->bytes[1], &argv[2]);
    napi_create_int32(env, s->err, &argv[3]);
    napi_call_function(env, undefined, js_cb, 4, argv, NULL);
  }
  napi_release_threadsafe_function(s->tsfn, napi_tsfn_release);
  s->tsfn = NULL;
  /* From now on the handle may be collected; its finalizer frees the struct. */
  if (env != NULL && s->self != NULL) {
    napi_delete_reference(env, s->self);
    s->self = NULL;
  }
}

static void finalize_handle(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  ksp_splice *s = (ksp_splice *)data;
  /* Normally reached after call_js; at environment teardown the thread may still run: end it first. */
  if (!s->joined) {
    if (s->cancel >= 0) {
      uint64_t one = 1;
      ssize_t r = write(s->cancel, &one, sizeof one);
      (void)r;
    }
    pthread_join(s->thread, NULL);
    s->joined = 1;
  }
  free(s);
}

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, NULL, msg);
  return NULL;
}

/* start(clientFd, upstreamFd, onEnd, noProgressMs) -> handle */
static napi_value start(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) {
    napi_throw_type_error(env, NULL, "start(clientFd, upstreamFd, onEnd)");
    return NULL;
  }
  int32_t fds[2];
  if (napi_get_value_int32(env, argv[0], &fds[0]) != napi_ok || napi_get_value_int32(env, argv[1], &fds[1]) != napi_ok || fds[0] < 0 || fds[1] < 0) {
    napi_throw_type_error(env, NULL, "start: file descriptors must be non-negative integers");
    return NULL;
  }
  double no_progress = DEFAULT_NO_PROGRESS_MS;
  if (argc >= 4) {
    napi_valuetype t;
    napi_typeof(env, argv[3], &t);
    if (t == napi_number) napi_get_value_double(env, argv[3], &no_progress);
    if (t != napi_undefined && (t != napi_number || !(no_progress >= 1))) {
      napi_throw_type_error(env, NULL, "start: noProgressMs must be a number >= 1");
      return NULL;
    }
  }
  ksp_splice *s = calloc(1, sizeof *s);
  if (!s) return throw_errno(env, "start", ENOMEM);
  s->no_progress_ms = no_progress > 9e15 ? (int64_t)9e15 : (int64_t)no_progress;
  s->fd[0] = s->fd[1] = -1;
  s->cancel = -1;
  for (int d = 0; d < 2; d++) s->pipe[d][0] = s->pipe[d][1] = -1;
  int err = 0;
  for (int i = 0; i < 2 && !err; i++) {
    s->fd[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    if (s->fd[i] < 0) err = errno;
  }
  for (int d = 0; d < 2 && !err; d++) {
    if (pipe2(s->pipe[d], O_NONBLOCK | O_CLOEXEC) < 0) {
      err = errno;
      break;
    }
    int got = fcntl(s->pipe[d][1], F_SETPIPE_SZ, PIPE_BYTES);
    if (got < 0) got = fcntl(s->pipe[d][1], F_GETPIPE_SZ);
    s->cap[d] = got > 0 ? (size_t)got : 65536;
  }
  if (!err) {
    s->cancel = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->cancel < 0) err = errno;
  }
  if (err) {
    for (int i = 0; i < 2; i++)
      if (s->fd[i] >= 0) close(s->fd[i]);
    for (int d = 0; d < 2; d++)
      for (int e = 0; e < 2; e++)
        if (s->pipe[d][e] >= 0) close(s->pipe[d][e]);
    if (s->cancel >= 0) close(s->cancel);
    free(s);
    return throw_errno(env, "start", err);
  }
  napi_value handle, name;
  napi_create_object(env, &handle);
  napi_wrap(env, handle, s, finalize_handle, NULL, NULL);
  napi_create_string_utf8(env, "ksp_splice", NAPI_AUTO_LENGTH, &name);
  napi_create_reference(env, handle, 1, &s->self);
  if (napi_create_threadsafe_function(env, argv[2], NULL, name, 0, 1, NULL, NULL, NULL, call_js, &s->tsfn) != napi_ok) {
    napi_throw_type_error(env, NULL, "start: onEnd must be a function");
    for (int i = 0; i < 2; i++) close(s->fd[i]);
    for (int d = 0; d < 2; d++)
      for (int e = 0; e < 2; e++) close(s->pipe[d][e]);
    close(s->cancel);
    s->cancel = -1;
    s->joined = 1;
    napi_delete_reference(env, s->self);
    s->self = NULL;
    return NULL;
  }
  int rc = pthread_create(&s->thread, NULL, run, s);
  if (rc != 0) {
    for (int i = 0; i < 2; i++) close(s->fd[i]);
    for (int d = 0; d < 2; d++)
      for (int e = 0; e < 2; e++) close(s->pipe[d][e]);
    close(s->cancel);
    s->cancel = -1;
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    s->tsfn = NULL;
    s->joined = 1;
    napi_delete_reference(env, s->self);
    s->self = NULL;
    return throw_errno(env, "start: pthread_create", rc);
  }
  return handle;
}

static ksp_splice *unwrap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  void *p = NULL;
  if (argc < 1 || napi_unwrap(env, argv[0], &p) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a splice handle");
    return NULL;
  }
  return (ksp_splice *)p;
}

/* stop(handle): end the thread now (no flush); onEnd follows with side 2. A finished splice ignores it. */
static napi_value stop(napi_env env, napi_callback_info info) {
  ksp_splice *s = unwrap(env, info);
  if (s && s->cancel >= 0) {
    uint64_t one = 1;
    ssize_t r = write(s->cancel, &one, sizeof one);
    (void)r;
  }
  return NULL;
}

/* bytes(handle) -> [toUpstream, toClient] so far */
static napi_value bytes(napi_env env, napi_callback_info info) {
  ksp_splice *s = unwrap(env, info);
  if (!s) return NULL;
  napi_value arr, a, b;
  napi_create_array_with_length(env, 2, &arr);
  napi_create_double(env, (double)__atomic_load_n(&s->bytes[0], __ATOMIC_RELAXED), &a);
  napi_create_double(env, (double)__atomic_load_n(&s->bytes[1], __ATOMIC_RELAXED), &b);
  napi_set_element(env, arr, 0, a);
  napi_set_element(env, arr, 1, b);
  return arr;
}

/* The descriptor argument of unsent() and peerWindow(), or -1. */
static int32_t fd_arg(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok) return -1;
  return fd;
}

/* unsent(fd) -> bytes the socket's kernel send queue holds that its peer has not acknowledged
   (SIOCOUTQ), or -1 when the descriptor is no socket that can tell. */
static napi_value unsent(napi_env env, napi_callback_info info) {
  int32_t fd = fd_arg(env, info);
  int n = -1;
  if (fd < 0 || ioctl(fd, SIOCOUTQ, &n) < 0) n = -1;
  napi_value out;
  napi_create_int32(env, n, &out);
  return out;
}

/* peerWindow(fd) -> the receive window the socket's peer advertised last (TCP_INFO tcpi_snd_wnd):
   it grows when the peer's application reads. -1 when the kernel or the descriptor cannot tell. */
static napi_value peer_window(napi_env env, napi_callback_info info) {
  int32_t fd = fd_arg(env, info);
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  double n = -1;
  memset(&ti, 0, sizeof ti);
  if (fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && len >= offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof ti.tcpi_snd_wnd)
    n = (double)ti.tcpi_snd_wnd;
  napi_value out;
  napi_create_double(env, n, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"start", NULL, start, NULL, NULL, NULL, napi_default, NULL},
      {"stop", NULL, stop, NULL, NULL, NULL, napi_default, NULL},
      {"bytes", NULL, bytes, NULL, NULL, NULL, napi_default, NULL},
      {"unsent", NULL, unsent, NULL, NULL, NULL, napi_default, NULL},
      {"peerWindow", NULL, peer_window, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 5, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
