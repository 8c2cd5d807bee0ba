#!/bin/bash
# Carry gpu-lab's stash (and any extra parts) to the device in pieces that fit one call beside the repo.
#
# A device call carries at most 64 MiB, the tracked tree included; the tree is ~27 MB now (2026-12-05), so
# gpu-lab's 51-57 MB chunks (c1..c6) no longer fit. This re-packs them, with optional extra folders (e.g.
# the clients' parts k1..k5 of agents_clients_h200.sh), into tars split in 34 MB pieces (PIECE=bytes to
# change it: a piece and the tree together must stay under 67,108,864 bytes):
#   here:   bash evidence/device/payload.sh pack A .gpu/c1 .gpu/c2 .gpu/c3 .gpu/c4 .gpu/c5 .gpu/c6
#           bash evidence/device/payload.sh pack B .gpu/k1 .gpu/k2 .gpu/k3 .gpu/k4 .gpu/k5
#           -> .gpu/A1..An, .gpu/B1..Bm and .gpu/bin/{A,B}.sha256
#   device, one call a piece, back to back:
#           run command: bash evidence/device/payload.sh put .gpu/A1     carry: [".gpu/A1"]
#   then, with the last piece, unpack into /root/stash (where gpu-lab's scripts look):
#           bash evidence/device/payload.sh put .gpu/A8 && bash evidence/device/payload.sh unpack A \
#             && bash .gpu/bin/device-install.sh                          carry: [".gpu/A8", ".gpu/bin"]
set -euo pipefail
case "${1:-}" in
  pack)
    name=$2; shift 2
    tmp=$(mktemp -d); for c in "$@"; do cp -al "$c"/. "$tmp"/; done
    rm -rf .gpu/"$name"[0-9]*
    (cd "$tmp" && tar cf - --sort=name --mtime=@0 --owner=0 --group=0 .) > "$tmp.tar"
    sha256sum "$tmp.tar" | cut -d' ' -f1 > .gpu/bin/"$name".sha256
    split -b "${PIECE:-34000000}" -d -a 2 "$tmp.tar" "$tmp.part"
    n=0; for f in "$tmp".part*; do n=$((n + 1)); mkdir -p .gpu/"$name$n"; mv "$f" .gpu/"$name$n"/"$name".part$(printf %02d $((n - 1))); done
    rm -rf "$tmp" "$tmp.tar"; echo "$name: $n pieces"; ls -d .gpu/"$name"[0-9]* ;;
  put)
    mkdir -p /root/inbox; cp "$2"/* /root/inbox/; echo "inbox: $(ls /root/inbox | wc -l) pieces, $(du -sh /root/inbox | cut -f1)" ;;
  unpack)
    name=$2; got=$(cat /root/inbox/"$name".part* | sha256sum | cut -d' ' -f1)
    [ "$got" = "$(cat .gpu/bin/"$name".sha256)" ] || { echo "pieces of $name incomplete (machine went cold?)"; ls /root/inbox; exit 3; }
    mkdir -p /root/stash; cat /root/inbox/"$name".part* | tar xf - -C /root/stash; rm -f /root/inbox/"$name".part*
    echo "unpacked $name into /root/stash" ;;
  *) echo "usage: payload.sh pack NAME DIR... | put DIR | unpack NAME" >&2; exit 2 ;;
esac
