/**
 * A port-forward session's record: metadata only — who, which pod, which ports, bytes each way,
 * start and duration — never the forwarded data. It is a {@link RelayObserver} (it only counts the
 * chunks); the ports come from the request (`ports` query, WebSocket) and from the SPDY streams'
 * `port` headers (`noteStreamHeaders`, fed by `spdy-tap.ts`'s stream table), and the record is
 * written to the sink when the session ends — only for a session that got the upstream's 101
 * (`upgraded`; the session recorder's records start out not created): a refused one stores nothing.
 */
import { performance } from 'node:perf_hooks';
import type { V1Status } from '../status.js';
import { NEVER_ABORTED, type RelayedBytes, type RelayObserver, type TapProtocol, type TerminationPlan } from './observer.js';
import type { RecordingLogger } from './session-recording.js';
import type { RecordingMetrics, SinkLabel } from './recording-metrics.js';
import type { RecordingSink, RecordingSummary } from './sink.js';

/** Ports kept per record (a client may open many streams; the list stays bounded). */
export const MAX_RECORDED_PORTS = 64;

/** What the record is about. */
export interface PortForwardFacts {
  id: string;
  user?: string;
  groups?: readonly string[];
  /** Why `user` is absent (see `caller-identity.ts`). */
  userUnknown?: string;
  cluster?: string;
  namespace: string;
  pod: string;
  /** The `ports` query values, when given. */
  ports: readonly string[];
  enforce: boolean;
  recordedBy?: string;
}

/** One port-forward session's metadata record. */
export class PortForwardRecording implements RelayObserver {
  readonly id: string;
  readonly fatal = NEVER_ABORTED;
  readonly #facts: PortForwardFacts;
  readonly #sink: RecordingSink;
  readonly #sinkLabel: SinkLabel;
  readonly #metrics: RecordingMetrics;
  readonly #log: RecordingLogger;
  readonly #ports: Set<string>;
  readonly #startedAtMs = Date.now();
  readonly #t0 = performance.now();
  #toUpstream = 0;
  #toClient = 0;
  #done: Promise<RecordingSummary> | undefined;
  #created: boolean;
  #abandoned = false;
  #unreadable = false;

  /** `created: false`: nothing is written unless {@link upgraded} is called (the session recorder's). */
  constructor(facts: PortForwardFacts, sink: RecordingSink, metrics: RecordingMetrics, log: RecordingLogger, options: { created?: boolean } = {}) {
    this.id = facts.id;
    this.#facts = facts;
    this.#sink = sink;
    this.#sinkLabel = sink.kind;
    this.#metrics = metrics;
    this.#log = log;
    this.#ports = new Set(facts.ports.slice(0, MAX_RECORDED_PORTS));
    this.#created = options.created ?? true;
    if (this.#created) metrics.addActiveRecordings(1);
  }

  /** True once the session got the upstream's 101 (or when made created). */
  get created(): boolean {
    return this.#created;
  }

  /** The upstream's 101 arrived: the record will be written when the session ends. */
  upgraded(): void {
    if (this.#created || this.#done) return;
    this.#created = true;
    this.#metrics.addActiveRecordings(1);
  }

  /** As {@link upgraded}, for a relay that waits for the creation before its client's 101: nothing to wait for (the record is written at the end). */
  create(): Promise<undefined> {
    this.upgraded();
    return Promise.resolve(undefined);
  }

  /** The session never got the upstream's 101: nothing is written; counted as a refused attempt. */
  abandon(statusCode: number): void {
    if (this.#created || this.#abandoned) return;
    this.#abandoned = true;
    this.#metrics.incRefusedAttempt(statusCode);
    void this.finish();
  }

  /** Who the record names. */
  get caller(): { user?: string; userUnknown?: string } {
    const { user, userUnknown } = this.#facts;
    return { ...(user !== undefined ? { user } : {}), ...(userUnknown !== undefined ? { userUnknown } : {}) };
  }

  /**
   * The SPDY tap could not read the client's streams past some point (`spdy-tap.ts`): ports of later
   * streams may be missing, so the record says `result: incomplete` (and the metric counts it).
   */
  unreadable(protocol: TapProtocol, cause: Error): void {
    if (this.#unreadable) return;
    this.#unreadable = true;
    this.#metrics.incUnreadableStream(protocol);
    this.#log.warn({ recordingId: this.id, protocol, err: { name: cause.name, code: (cause as { code?: unknown }).code } }, 'port-forward record: the stream could not be read');
  }

  /** A port seen in a stream's headers (SPDY `port`). */
  notePort(port: string): void {
    if (this.#ports.size < MAX_RECORDED_PORTS && /^\d{1,5}$/.test(port)) this.#ports.add(port);
  }

  fromClient(chunk: Buffer): void {
    this.#toUpstream += chunk.length;
  }

  fromUpstream(chunk: Buffer): void {
    this.#toClient += chunk.length;
  }

  terminate(_status: V1Status): TerminationPlan | undefined {
    return undefined;
  }

  close(bytes?: RelayedBytes): void {
    void this.finish(bytes);
  }

  /** Write the record (once). */
  finish(bytes?: RelayedBytes): Promise<RecordingSummary> {
    if (this.#done) return this.#done;
    const f = this.#facts;
    const summary: RecordingSummary = {
      id: f.id,
      subresource: 'portforward',
      ...(f.user !== undefined ? { user: f.user } : {}),
      ...(f.groups !== undefined ? { groups: [...f.groups] } : {}),
      ...(f.userUnknown !== undefined ? { userUnknown: f.userUnknown } : {}),
      ...(f.cluster !== undefined ? { cluster: f.cluster } : {}),
      namespace: f.namespace,
      pod: f.pod,
      ports: [...this.#ports],
      record: 'metadata',
      enforce: f.enforce,
      start: new Date(this.#startedAtMs).toISOString(),
      durationSeconds: Math.round(performance.now() - this.#t0) / 1000,
      exitCode: null,
      bytesToUpstream: bytes?.toUpstream ?? this.#toUpstream,
      bytesToClient: bytes?.toClient ?? this.#toClient,
      result: this.#unreadable ? 'incomplete' : 'complete',
      ...(f.recordedBy !== undefined ? { recordedBy: f.recordedBy } : {}),
    };
    if (!this.#created) {
      // Never upgraded: nothing is stored.
      this.#done = Promise.resolve(summary);
      return this.#done;
    }
    this.#done = this.#sink.writeRecord(summary).then(
      () => {
        this.#metrics.addRecordedBytes(this.#sinkLabel, JSON.stringify(summary).length);
        return summary;
      },
      (err: Error) => {
        this.#metrics.incSinkError(this.#sinkLabel, 'write');
        this.#log.warn({ recordingId: f.id, err: { message: err.message } }, 'port-forward record could not be written');
        return { ...summary, result: 'incomplete' as const };
      },
    ).then((s) => {
      this.#metrics.incRecording('portforward', s.result);
      this.#metrics.addActiveRecordings(-1);
      return s;
    });
    return this.#done;
  }
}
