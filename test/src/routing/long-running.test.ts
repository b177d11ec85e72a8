/** The long-running request check (`src/routing/long-running.ts`) as a table, after kube-apiserver's. */
import { describe, expect, it } from 'vitest';
import { isLongRunningRequest } from '../../../src/routing/long-running.js';

describe('isLongRunningRequest', () => {
  it.each([
    ['/api/v1/namespaces/default/pods?watch=true', true],
    ['/api/v1/namespaces/default/pods?watch=1', true],
    ['/api/v1/namespaces/default/pods?watch=false', false],
    ['/apis/apps/v1/deployments?watch=true&resourceVersion=1', true],
    ['/api/v1/watch/namespaces/default/pods', true],
    ['/api/v1/namespaces/default/pods/demo/exec?command=sh', true],
    ['/api/v1/namespaces/default/pods/demo/attach', true],
    ['/api/v1/namespaces/default/pods/demo/portforward?ports=80', true],
    ['/api/v1/namespaces/default/pods/demo/log?follow=true', true],
    ['/api/v1/namespaces/default/pods/demo/log', true],
    ['/api/v1/namespaces/default/services/web/proxy/healthz', true],
    ['/api/v1/nodes/n1/proxy/metrics', true],
    ['/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm/console', false],
    ['/api/v1/namespaces/default/configmaps/log', false],
    ['/api/v1/namespaces/default/pods/exec', false],
    ['/api/v1/namespaces/log', false],
    ['/api/v1/namespaces/default/pods', false],
    ['/version', false],
    ['/healthz', false],
  ])('%s → %s', (url, want) => {
    expect(isLongRunningRequest(url)).toBe(want);
  });
});
