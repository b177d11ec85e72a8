#!/bin/sh
# `npm test`'s pretest step: the programs the suite needs beyond `npm ci`, from Debian's packages.
#
#   package     programs             used by
#   prometheus  prometheus, promtool test/operability/metrics-e2e.test.ts (promtool check metrics),
#                                    test/operability/prometheus-scrape.test.ts (a real scrape)
#   tmux        tmux                 the `kubectl exec -it` terminal tests (test/helpers/tty.ts)
#   nginx       nginx                the bench's nginx passthrough rows (bench/nginx.ts, bench --quick test)
#   haproxy     haproxy              the bench's HAProxy relay rows
#   socat       socat                the bench's socat relay rows
#   openssl     openssl              the dev PKI (dev/dev-pki.ts): test certificates and the demo's aggregated backend
#   chromium    chromium             real headless Chromium: the recorder's /sessions/ page (test/src/recording/recorder-page.test.ts), the OIDC sign-in page and a browser's WebSocket exec (test/e2e/jwt-browser.test.ts)
#   asciinema   asciinema            asciinema 2.2 reads the recordings (test/src/recording/asciinema-cli.test.ts)
#   python3-kubernetes  (module)     the Python client (WebSocket v4 exec and port-forward) through the proxy
#                                    (test/e2e/python-client.test.ts), run by Debian's /usr/bin/python3
#
# All present: exits 0 at once (a handful of `command -v`, no process started). Missing ones are
# installed when this runs as root with apt-get (one `apt-get update`, then `apt-get install`, both
# waiting up to 300 s for a dpkg/apt lock that another process holds); otherwise it exits 1 and prints
# the exact command to run. KSP_PROVISION_DRY_RUN=1 only reports what is missing (for its own test).
set -u

# Programs may live in sbin directories that a non-root PATH leaves out.
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# Adds PACKAGE to $missing unless every PROGRAM is on PATH.
missing=""
need() {
  pkg=$1
  shift
  for prog in "$@"; do
    command -v "$prog" >/dev/null 2>&1 || { missing="$missing $pkg"; return 0; }
  done
}
check_all() {
  missing=""
  need prometheus prometheus promtool
  need tmux tmux
  need nginx nginx
  need haproxy haproxy
  need socat socat
  need openssl openssl
  need chromium chromium
  need asciinema asciinema
  # Debian's own Python (the module is Debian's), or KSP_PYTHON (the script's test).
  "${KSP_PYTHON:-/usr/bin/python3}" -c 'import kubernetes' >/dev/null 2>&1 || missing="$missing python3-kubernetes"
}

check_all
missing=${missing# }
[ -z "$missing" ] && exit 0

command_line="apt-get update && apt-get install -y $missing"
if [ "${KSP_PROVISION_DRY_RUN:-}" = 1 ]; then
  echo "provision-test-tools: missing Debian packages: $missing"
  exit 1
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then how="sudo sh -c '$command_line'"; else how="(no apt-get here) install the Debian/Ubuntu packages: $missing"; fi
  echo "provision-test-tools: the test suite needs programs that are not installed: Debian packages $missing." >&2
  echo "Run this, then npm test again:" >&2
  echo "  $how" >&2
  exit 1
fi

echo "provision-test-tools: installing Debian packages the tests need: $missing"
LOCK_WAIT="-o DPkg::Lock::Timeout=300"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # $LOCK_WAIT and $missing are word lists
if ! apt-get $LOCK_WAIT update -qq >/dev/null || ! apt-get $LOCK_WAIT install -y -qq --no-install-recommends $missing >/dev/null; then
  echo "provision-test-tools: apt-get failed; run this, then npm test again:" >&2
  echo "  $command_line" >&2
  exit 1
fi

# The install must have brought every program.
installed=$missing
check_all
if [ -n "$missing" ]; then
  echo "provision-test-tools: after apt-get install, programs of these packages are still not on PATH:$missing" >&2
  exit 1
fi
echo "provision-test-tools: installed $installed"
