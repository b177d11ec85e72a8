/** The test PKI is the dev PKI (`src/dev-pki.ts`): the demo issues its certificates the same way. */
export * from '../../src/dev-pki.js';
