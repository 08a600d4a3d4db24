#!/bin/sh
# Fetches uPlot $1 from npm and copies the files the HTML report embeds here.
# Usage (from the repository's root): sh reporters/html/vendor/update.sh 1.6.32
set -eu
version=${1:?usage: update.sh VERSION}
dest=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar xzf "uplot-$version.tgz")
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$dest/"
cp "$tmp/package/LICENSE" "$dest/LICENSE.uPlot"
echo "uPlot $version copied to $dest; sha256 of the tarball:"
sha256sum "$tmp/uplot-$version.tgz"
