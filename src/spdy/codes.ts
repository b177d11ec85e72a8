/**
 * Status codes carried by RST_STREAM and GOAWAY (SPDY/3 §2.6.3 and §2.6.6).
 */

/** RST_STREAM status codes. */
export const RstStatus = {
  PROTOCOL_ERROR: 1,
  INVALID_STREAM: 2,
  REFUSED_STREAM: 3,
  UNSUPPORTED_VERSION: 4,
  CANCEL: 5,
  INTERNAL_ERROR: 6,
  FLOW_CONTROL_ERROR: 7,
  STREAM_IN_USE: 8,
  STREAM_ALREADY_CLOSED: 9,
  FRAME_TOO_LARGE: 11,
} as const;

/** GOAWAY status codes. */
export const GoAwayStatus = {
  OK: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
} as const;
