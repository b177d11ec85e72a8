/**
 * A port-forward session's record: metadata only — who, which pod, which ports, bytes each way,
 * start and duration — never the forwarded data. It is a {@link RelayObserver} (it only counts the
 * chunks); the ports come from the request (`ports` query, WebSocket) and from the SPDY streams'
 * `port` headers (`noteStreamHeaders`, fed by `spdy-tap.ts`'s stream table), and the record is
 * written to the sink when the session ends.
 */
import { performance } from 'node:perf_hooks';
import type { V1Status } from '../status.js';
import { NEVER_ABORTED, type RelayedBytes, type RelayObserver, type TerminationPlan } from './observer.js';
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

  constructor(facts: PortForwardFacts, sink: RecordingSink, metrics: RecordingMetrics, log: RecordingLogger) {
    this.id = facts.id;
    this.#facts = facts;
    this.#sink = sink;
    this.#sinkLabel = sink.kind;
    this.#metrics = metrics;
    this.#log = log;
    this.#ports = new Set(facts.ports.slice(0, MAX_RECORDED_PORTS));
    metrics.addActiveRecordings(1);
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
      result: 'complete',
      ...(f.recordedBy !== undefined ? { recordedBy: f.recordedBy } : {}),
    };
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
