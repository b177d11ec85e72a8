/**
 * The dev cluster's streaming counters as Prometheus text (`streaming-metrics.ts`): names, HELP with
 * the stability prefix, TYPE before the first sample, labels sorted by name, values counting up.
 */
import { describe, expect, it } from 'vitest';
import { ApiserverStreamingMetrics, KubeletStreamingMetrics } from '../../../dev/cluster/streaming-metrics.js';

describe('ApiserverStreamingMetrics', () => {
  it('prints HELP and TYPE of every family before any sample', () => {
    const text = new ApiserverStreamingMetrics().exposition();
    expect(text.split('\n').filter((l) => l.startsWith('# TYPE'))).toEqual([
      '# TYPE apiserver_websocket_streaming_requests_total counter',
      '# TYPE apiserver_stream_translator_requests_total counter',
      '# TYPE apiserver_stream_tunnel_requests_total counter',
    ]);
    expect(text).toMatch(/^# HELP apiserver_websocket_streaming_requests_total \[ALPHA\] Total number of WebSocket streaming requests/m);
    expect(text.split('\n').filter((l) => l !== '' && !l.startsWith('#'))).toEqual([]);
    expect(text.endsWith('\n')).toBe(true);
  });

  it('counts per label set, labels sorted by name as Go prints them', () => {
    const m = new ApiserverStreamingMetrics();
    m.incWebSocketStreaming('exec', 'proxied_to_kubelet');
    m.incWebSocketStreaming('exec', 'proxied_to_kubelet');
    m.incWebSocketStreaming('portforward', 'tunneled_at_apiserver');
    m.incStreamTranslatorRequest(200);
    m.incStreamTunnelRequest('101');
    expect(m.exposition().split('\n').filter((l) => l !== '' && !l.startsWith('#'))).toEqual([
      'apiserver_websocket_streaming_requests_total{proxy_type="proxied_to_kubelet",subresource="exec"} 2',
      'apiserver_websocket_streaming_requests_total{proxy_type="tunneled_at_apiserver",subresource="portforward"} 1',
      'apiserver_stream_translator_requests_total{code="200"} 1',
      'apiserver_stream_tunnel_requests_total{code="101"} 1',
    ]);
  });
});

describe('KubeletStreamingMetrics', () => {
  it('counts per subresource', () => {
    const m = new KubeletStreamingMetrics();
    m.incWebSocketStreaming('attach');
    expect(m.exposition()).toBe(
      '# HELP kubelet_websocket_streaming_requests_total [ALPHA] Total number of WebSocket streaming requests (exec/attach/portforward) received by the kubelet.\n' +
        '# TYPE kubelet_websocket_streaming_requests_total counter\n' +
        'kubelet_websocket_streaming_requests_total{subresource="attach"} 1\n',
    );
  });
});
