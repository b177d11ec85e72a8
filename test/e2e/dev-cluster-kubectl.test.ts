/**
 * Acceptance matrix: real kubectl binaries (SPDY) against the dev cluster directly, no proxy between.
 */
import { startDevCluster } from '../../dev/cluster/dev-cluster.js';
import { describeSpdyKubectlMatrix } from './spdy-kubectl-matrix.js';

describeSpdyKubectlMatrix('kubectl → dev cluster', async (podsDir) => {
  const cluster = await startDevCluster({ dataDir: podsDir });
  return { url: cluster.url, close: () => cluster.close() };
});
