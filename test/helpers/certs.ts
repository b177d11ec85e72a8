/** The test PKI is the dev PKI (`dev/dev-pki.ts`): the demo issues its certificates the same way. */
export * from '../../dev/dev-pki.js';
