/**
 * The embedded development cluster (placeholder: replaced by the real implementation).
 */

/** Options of {@link startDevCluster}. */
export interface DevClusterOptions {
  /** Listen host (default 127.0.0.1). */
  host?: string;
  /** Listen port (default 0: a free port). */
  port?: number;
  /** Extra pods in namespace "default"; "demo" always exists. */
  pods?: string[];
  /** Folder for the pods' working directories (default: a new temp folder). */
  dataDir?: string;
}

/** A running dev cluster. */
export interface DevCluster {
  /** Base URL, e.g. http://127.0.0.1:6444 */
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startDevCluster(_options: DevClusterOptions = {}): Promise<DevCluster> {
  throw new Error('dev cluster not implemented yet');
}
