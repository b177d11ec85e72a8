/*
 * ksp_cast: the session recorder's hot loop in C (src/recording/native-cast-escape.ts). One call
 * turns a chunk of a command's output into the JSON string body of an asciicast event: UTF-8
 * validated (invalid sequences become U+FFFD, WHATWG's "maximal subpart" rule, as V8's decoder),
 * escaped exactly as JSON.stringify escapes (`"` `\` and the C0 controls: \b \f \n \r \t by name,
 * the rest as \u00xx in lower case; nothing else), optionally LF written as CR LF (a non-tty
 * session's output, as the client's terminal would show it), between a given head and tail.
 *
 *   escape(input: Uint8Array, flags: number, head: string, tail: string) -> [Buffer | null, consumed]
 *
 * flags: 1 = LF as CR LF; 2 = final (an incomplete sequence at the end is U+FFFD instead of being
 * left for the next call). `consumed` is how many input bytes were used: the rest (at most 3 bytes,
 * the start of a character split across chunks) goes in front of the next chunk. The Buffer is
 * null when no character was complete. On Node 20, JSON.stringify of a decoded chunk costs 1-2
 * CPU-s per GB; this is a few tenths (docs/recording.md, "Cost").
 */
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FLAG_CRLF 1
#define FLAG_FINAL 2

/*
 * Per byte < 0x80: how many output bytes it takes (1: itself) and, for the escaped ones, the escape
 * (8 bytes reserved, so one fixed-size copy writes it). Table 1 writes LF as CR LF.
 */
static uint8_t esclen[2][128];
static uint8_t esc[2][128][8];

static void init_tables(void) {
  static const char hex[] = "0123456789abcdef";
  for (int t = 0; t < 2; t++) {
    for (int c = 0; c < 128; c++) {
      const char *named = NULL;
      switch (c) {
        case '"': named = "\\\""; break;
        case '\\': named = "\\\\"; break;
        case '\b': named = "\\b"; break;
        case '\f': named = "\\f"; break;
        case '\n': named = t ? "\\r\\n" : "\\n"; break;
        case '\r': named = "\\r"; break;
        case '\t': named = "\\t"; break;
      }
      if (named) {
        esclen[t][c] = (uint8_t)strlen(named);
        memcpy(esc[t][c], named, strlen(named));
      } else if (c < 0x20) {
        esclen[t][c] = 6;
        memcpy(esc[t][c], "\\u00", 4);
        esc[t][c][4] = (uint8_t)hex[c >> 4];
        esc[t][c][5] = (uint8_t)hex[c & 15];
      } else {
        esclen[t][c] = 1;
        esc[t][c][0] = (uint8_t)c;
      }
    }
  }
}

static inline int cont(uint8_t b) { return b >= 0x80 && b <= 0xbf; }

#define L8 0x0101010101010101ULL
#define H8 0x8080808080808080ULL

/* Nonzero when one of the 8 bytes of x needs more than a copy: < 0x20, '"', backslash or >= 0x80. */
static inline uint64_t special8(uint64_t x) {
  uint64_t q = x ^ (0x22 * L8), b = x ^ (0x5c * L8);
  return (((x - 0x20 * L8) & ~x) | ((q - L8) & ~q) | ((b - L8) & ~b) | x) & H8;
}

/*
 * Length of the valid UTF-8 sequence at p[0..n) starting with a byte >= 0x80: 2..4; or 0 when the
 * sequence is incomplete at the end of the input (every byte present was valid); or -k when it is
 * invalid: one U+FFFD replaces the first k bytes (k >= 1).
 */
static int sequence(const uint8_t *p, size_t n) {
  uint8_t b = p[0];
  uint8_t lo = 0x80, hi = 0xbf;
  int len;
  if (b >= 0xc2 && b <= 0xdf) len = 2;
  else if (b >= 0xe0 && b <= 0xef) {
    len = 3;
    if (b == 0xe0) lo = 0xa0;
    if (b == 0xed) hi = 0x9f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    len = 4;
    if (b == 0xf0) lo = 0x90;
    if (b == 0xf4) hi = 0x8f;
  } else return -1;
  for (int i = 1; i < len; i++) {
    if ((size_t)i >= n) return 0;
    uint8_t c = p[i];
    if (i == 1 ? (c < lo || c > hi) : !cont(c)) return -i;
  }
  return len;
}

/* One pass writing `out` (room for 6 bytes per input byte); returns its length. `consumed` gets the input used. */
static size_t run(const uint8_t *in, size_t n, int flags, uint8_t *out, size_t *consumed) {
  const uint8_t *len = esclen[flags & FLAG_CRLF ? 1 : 0];
  const uint8_t(*table)[8] = esc[flags & FLAG_CRLF ? 1 : 0];
  size_t o = 0, i = 0;
  while (i < n) {
    uint8_t b = in[i];
    if (b < 0x80) {
      if (len[b] == 1) {
        size_t j = i + 1;
        /* 8 bytes at a time while none needs escaping, then byte by byte. */
        for (uint64_t w; j + 8 <= n; j += 8) {
          memcpy(&w, in + j, 8);
          if (special8(w)) break;
        }
        while (j < n && in[j] < 0x80 && len[in[j]] == 1) j++;
        memcpy(out + o, in + i, j - i);
        o += j - i;
        i = j;
        continue;
      }
      memcpy(out + o, table[b], 8);
      o += len[b];
      i++;
      continue;
    }
    int s = sequence(in + i, n - i);
    if (s > 0) {
      memcpy(out + o, in + i, (size_t)s);
      o += (size_t)s;
      i += (size_t)s;
      continue;
    }
    if (s == 0 && !(flags & FLAG_FINAL)) break; /* the rest comes with the next chunk */
    out[o] = 0xef, out[o + 1] = 0xbf, out[o + 2] = 0xbd;
    o += 3;
    i += s == 0 ? n - i : (size_t)(-s);
  }
  *consumed = i;
  return o;
}

static napi_value escape(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "escape(input, flags, head, tail)");
    return NULL;
  }
  napi_typedarray_type type;
  size_t n = 0;
  void *data = NULL;
  if (napi_get_typedarray_info(env, argv[0], &type, &n, &data, NULL, NULL) != napi_ok || type != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "escape: input must be a Uint8Array");
    return NULL;
  }
  uint32_t flags = 0;
  napi_get_value_uint32(env, argv[1], &flags);
  size_t headLen = 0, tailLen = 0;
  if (napi_get_value_string_latin1(env, argv[2], NULL, 0, &headLen) != napi_ok || napi_get_value_string_latin1(env, argv[3], NULL, 0, &tailLen) != napi_ok) {
    napi_throw_type_error(env, NULL, "escape: head and tail must be strings");
    return NULL;
  }
  if (headLen >= 256 || tailLen >= 256) {
    napi_throw_range_error(env, NULL, "escape: head or tail too long");
    return NULL;
  }
  /* One pass into a scratch buffer of the worst case (6 bytes out per byte in), then one copy. */
  static __thread uint8_t *scratch = NULL;
  static __thread size_t scratchSize = 0;
  size_t need = headLen + 6 * n + tailLen + 8;
  if (need > scratchSize) {
    uint8_t *grown = (uint8_t *)realloc(scratch, need);
    if (!grown) {
      napi_throw_error(env, NULL, "escape: out of memory");
      return NULL;
    }
    scratch = grown;
    scratchSize = need;
  }
  const uint8_t *in = (const uint8_t *)data;
  size_t consumed = 0;
  /* latin1 copies write a terminating NUL: the body then overwrites it. */
  napi_get_value_string_latin1(env, argv[2], (char *)scratch, headLen + 1, &headLen);
  size_t len = run(in, n, (int)flags, scratch + headLen, &consumed);
  napi_value result, line, used;
  napi_create_array_with_length(env, 2, &result);
  if (len == 0) {
    napi_get_null(env, &line);
  } else {
    napi_get_value_string_latin1(env, argv[3], (char *)scratch + headLen + len, tailLen + 1, &tailLen);
    if (napi_create_buffer_copy(env, headLen + len + tailLen, scratch, NULL, &line) != napi_ok) return NULL;
  }
  napi_create_double(env, (double)consumed, &used);
  napi_set_element(env, result, 0, line);
  napi_set_element(env, result, 1, used);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  init_tables();
  napi_property_descriptor props[] = {
      {"escape", NULL, escape, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 1, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
