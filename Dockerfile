# kube-stream-proxy image: `docker build -t kube-stream-proxy .` from the repository root.
# Both stages run the current Node LTS, the newest major in package.json's `engines` (CI runs the suite
# on it: runtimes/node-lts, docs/decisions.md). Build stage: the full image has python3/make/g++ for
# node-pty's native module (a runtime dependency of the dev cluster only, but part of `npm ci`).
FROM node:26-bookworm AS build
WORKDIR /app
# Dependencies first, so source edits do not invalidate the npm layer.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY dev ./dev
COPY handlers ./handlers
COPY proxy ./proxy
COPY translator ./translator
COPY bench ./bench
COPY binding.gyp ./
COPY native ./native
# Native modules (install scripts skipped above), the optional splice(2) addon, the TypeScript
# build, then drop dev dependencies.
RUN npm rebuild && npm run build:native && npm run build && npm prune --omit=dev

# Runtime stage: same Node major and Debian release as the build stage, so the native modules' glibc
# matches (the slim image ships libatomic1, which Node 25 and later link against).
FROM node:26-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/build ./build
# Non-root, numeric so `runAsNonRoot` can verify it (matches the Deployment's runAsUser).
USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["node", "bin/kube-stream-proxy.js"]
CMD ["serve", "--in-cluster", "--listen=0.0.0.0:8443", "--tls-cert-file=/etc/kube-stream-proxy/tls/tls.crt", "--tls-private-key-file=/etc/kube-stream-proxy/tls/tls.key"]
