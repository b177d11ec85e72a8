/**
 * The agents connected to this proxy replica, per cluster name. An entry is one HTTP/2 session
 * (one agent's tunnel); it leaves the registry when the session closes for any reason (the agent
 * went away, a PING went unanswered, GOAWAY). Several tunnels for one cluster (agent replicas, an
 * agent's new tunnel before its old one has died) are all kept; new streams go to the newest.
 */
import type { ClientHttp2Session } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { TunnelMetrics } from '../metrics.js';

/** One connected agent. */
export interface AgentTunnel {
  cluster: string;
  session: ClientHttp2Session;
  /** The agent's address, for logs. */
  remoteAddress: string | undefined;
  /** The `Host` the agent's apiserver expects (sent by the agent at connect). */
  upstreamHost: string;
  connectedAt: number;
  /**
   * The connection the session runs on, destroyed with the session when a close outlasts its
   * grace: Node's session close ends the socket and waits for that end() to call back before it
   * emits 'close', which was seen never to happen (the demo's SIGTERM right after a request through
   * the tunnel), leaving `closeAll` and the proxy's shutdown hanging.
   */
  socket?: Duplex;
}

/** Connected agents by cluster. */
export class AgentRegistry {
  readonly #byCluster = new Map<string, AgentTunnel[]>();
  readonly #metrics: TunnelMetrics | undefined;
  readonly #waiters = new Map<string, ((t: AgentTunnel) => void)[]>();

  constructor(metrics?: TunnelMetrics) {
    this.#metrics = metrics;
  }

  /** Register `tunnel` until its session closes. */
  add(tunnel: AgentTunnel): void {
    const list = this.#byCluster.get(tunnel.cluster) ?? [];
    list.push(tunnel);
    this.#byCluster.set(tunnel.cluster, list);
    this.#metrics?.setTunnelAgents(tunnel.cluster, list.length);
    tunnel.session.once('close', () => this.#remove(tunnel));
    const waiters = this.#waiters.get(tunnel.cluster) ?? [];
    this.#waiters.delete(tunnel.cluster);
    for (const w of waiters) w(tunnel);
  }

  /** The next tunnel registered for `cluster` (tests, start-up checks). */
  nextTunnel(cluster: string): Promise<AgentTunnel> {
    return new Promise((resolve) => {
      const list = this.#waiters.get(cluster) ?? [];
      list.push(resolve);
      this.#waiters.set(cluster, list);
    });
  }

  /**
   * Send GOAWAY on every tunnel (start of a graceful shutdown): streams in flight run on, new
   * requests for these clusters are refused here (503), and agents open a new tunnel at once — to
   * another replica behind the same address when there is one.
   */
  goAway(): void {
    for (const t of [...this.#byCluster.values()].flat()) if (!t.session.closed) t.session.close();
  }

  #remove(tunnel: AgentTunnel): void {
    const list = this.#byCluster.get(tunnel.cluster);
    if (!list) return;
    const rest = list.filter((t) => t !== tunnel);
    if (rest.length > 0) this.#byCluster.set(tunnel.cluster, rest);
    else this.#byCluster.delete(tunnel.cluster);
    this.#metrics?.setTunnelAgents(tunnel.cluster, rest.length);
  }

  /** The tunnel new streams for `cluster` use: the newest one still open, or undefined. */
  pick(cluster: string): AgentTunnel | undefined {
    const list = this.#byCluster.get(cluster) ?? [];
    for (let i = list.length - 1; i >= 0; i--) {
      const t = list[i]!;
      if (!t.session.closed && !t.session.destroyed) return t;
    }
    return undefined;
  }

  /** Cluster names with at least one agent. */
  clusters(): string[] {
    return [...this.#byCluster.keys()];
  }

  /**
   * Send GOAWAY on every tunnel (agents reconnect, to another replica if there is one; streams in
   * flight may finish), then destroy what is still open after `graceMs`.
   */
  async closeAll(graceMs: number): Promise<void> {
    const tunnels = [...this.#byCluster.values()].flat();
    await Promise.all(
      tunnels.map(
        ({ session: s, socket }) =>
          new Promise<void>((resolve) => {
            if (s.destroyed) return resolve();
            const timer = setTimeout(() => {
              s.destroy();
              socket?.destroy();
            }, graceMs);
            timer.unref();
            s.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
            s.close();
          }),
      ),
    );
  }
}
