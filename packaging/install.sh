#!/bin/sh
# Installs geminid and gemctl from this release archive, for the user running it, without a Rust
# toolchain: the binaries into ~/.local/bin ($PREFIX/bin), the man pages and the bash and fish
# completions into the user's own folders, then geminid as a socket-activated systemd user
# service (`gemctl daemon install-service --socket-activation`). Where no systemd user manager
# runs (a container, WSL without systemd), gemctl starts geminid whenever a command needs it.
# Usage: ./install.sh        Again with a newer archive to upgrade (then `gemctl daemon restart`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
prefix=${PREFIX:-${HOME:?HOME is not set}/.local}
data=${XDG_DATA_HOME:-$HOME/.local/share}
config=${XDG_CONFIG_HOME:-$HOME/.config}

# Nothing is copied from an archive whose files are not the ones it was built with.
if ! (cd "$here" && sha256sum --check --quiet --strict SHA256SUMS); then
  echo "install: the files above do not match the archive's SHA256SUMS: not installed" >&2
  exit 1
fi

# Each binary is written beside its final name and renamed over it: a daemon running the old
# one keeps running it, and no half-written binary is ever started.
mkdir -p "$prefix/bin"
for b in geminid gemctl; do
  cp "$here/bin/$b" "$prefix/bin/.$b.new"
  chmod 0755 "$prefix/bin/.$b.new"
  mv -f "$prefix/bin/.$b.new" "$prefix/bin/$b"
done
echo "installed geminid and gemctl in $prefix/bin"

mkdir -p "$data/man/man1" "$data/bash-completion/completions" "$config/fish/completions"
cp "$here"/man/man1/*.1 "$data/man/man1/"
cp "$here/completions/gemctl.bash" "$data/bash-completion/completions/gemctl"
cp "$here/completions/gemctl.fish" "$config/fish/completions/gemctl.fish"
echo "installed the man pages in $data/man/man1 and the bash and fish completions"

case ":${PATH:-}:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: $prefix/bin is not on PATH: add it (export PATH=\"$prefix/bin:\$PATH\")" >&2 ;;
esac

# install-service says itself what it did, and why not when no user manager answers; the
# binaries are installed either way.
if ! "$prefix/bin/gemctl" daemon install-service --socket-activation; then
  echo "note: the service was not enabled (above); gemctl starts geminid on demand" >&2
fi
