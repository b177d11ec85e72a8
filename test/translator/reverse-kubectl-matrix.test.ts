/**
 * The SPDY acceptance matrix (test/e2e/spdy-kubectl-matrix.ts: exec, exit codes, 20 MB stdin and 100 MB
 * stdout by sha256, exec -it with a resize, cp both ways, attach, port-forward) run by SPDY-only
 * kubectl — 1.27, 1.29, and 1.33 with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false /
 * KUBECTL_PORT_FORWARD_WEBSOCKETS=false — through the reverse translator and tunnel to a gateway that
 * refuses every SPDY upgrade (403) and speaks only WebSocket v5 and the port-forward tunnel, in front
 * of the dev cluster. Nothing streams unless the proxy translates SPDY ⇄ WebSocket: each streaming
 * test checks that the gateway took a WebSocket upgrade meanwhile.
 */
import { describeSpdyKubectlMatrix } from '../e2e/spdy-kubectl-matrix.js';
import { REVERSE_CLIENTS, startReverseFixture } from './reverse-fixture.js';

describeSpdyKubectlMatrix(
  'kubectl (SPDY) → reverse translator and tunnel → WebSocket-only gateway → dev cluster',
  async (podsDir) => {
    const fx = await startReverseFixture({ podsDir });
    return {
      url: fx.url,
      streamingUpgrades: async () => fx.gateway.upgrades.filter((u) => u.upgrade === 'websocket').length,
      close: () => fx.close(),
    };
  },
  REVERSE_CLIENTS,
);
