// The split tail's schedule (kernels/fa2_ws_split.cuh): its shares, the pieces of items they hold and the
// boundaries that cut items. Plain integer math, shared by the kernel's producer and consumers and by the
// host (ops/module.cpp fa2_split_pieces, which tests/test_fa2_schedule.py checks tile by tile).
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define FFPA_SPLIT_FN __host__ __device__ __forceinline__
#else
#define FFPA_SPLIT_FN inline
#endif

namespace ffpa::attn {

struct Fa2SplitSchedule {
  // A unit's key range as the producer hands it to the consumers beside its item (0: the whole item,
  // else jb | je << 16; the launcher keeps an item's tiles under kMaxTiles).
  static constexpr int kMaxTiles = 1 << 15;
  static FFPA_SPLIT_FN int range(int jb, int je) { return jb | je << 16; }
  static FFPA_SPLIT_FN int range_begin(int r) { return r & 0xffff; }
  static FFPA_SPLIT_FN int range_end(int r) { return r >> 16; }

  // W: key tiles of the split part, items [from, items) of n tiles each: at most 2 shares x kMaxTiles, an
  // int (the split part is one round and less than another, shares <= 65535 SMs).
  static FFPA_SPLIT_FN int tiles(int64_t items, int64_t from, int n) { return static_cast<int>((items - from) * n); }
  // Where share k starts in the split part's tiles (share k: [start(k), start(k + 1))).
  static FFPA_SPLIT_FN int start(int k, int w, int shares) {
    return static_cast<int>(static_cast<int64_t>(k) * w / shares);
  }
  // The share that starts at tile g of the split part (one does wherever a piece starts or ends inside
  // its item: shares are longer than a tile).
  static FFPA_SPLIT_FN int boundary(int g, int w, int shares) {
    return static_cast<int>((static_cast<int64_t>(g) * shares + w - 1) / w);
  }

  // The piece at tile g of a share that ends at tile b: item (counted from the split part's first),
  // tiles [jb, je) of it. The share's next piece starts at item * n + je.
  struct Piece {
    int item, jb, je;
  };
  static FFPA_SPLIT_FN Piece piece(int g, int b, int n) {
    const int i = g / n, first = i * n, end = b - first;
    return {i, g - first, end < n ? end : n};
  }
  // Share k's pieces in order, f(piece) each: the producer's walk (fa2_ws_producer.cuh), and the host's
  // listing of it (ops/module.cpp fa2_split_pieces) that tests/test_fa2_schedule.py checks.
  template <typename F>
  static FFPA_SPLIT_FN void for_each_piece(int k, int w, int shares, int n, F&& f) {
    const int b = start(k + 1, w, shares);
    for (int g = start(k, w, shares); g < b;) {
      const Piece pc = piece(g, b, n);
      f(pc);
      g = pc.item * n + pc.je;
    }
  }

  // The boundary (the share starting there) that cuts item i of the split part, or -1: one share holds
  // it whole. A share holds at least n tiles, so a cut item falls in two pieces, [0, c) and [c, n), on
  // the shares k - 1 and k; a piece knows its side from its end alone (c < n), which keeps the
  // consumers' registers free of the piece's range across its tiles.
  static FFPA_SPLIT_FN int cut_at(int item, int n, int w, int shares) {
    const int k = boundary(item * n + 1, w, shares);  // the first share starting past the item's first tile
    return k < shares && start(k, w, shares) < item * n + n ? k : -1;
  }
};

}  // namespace ffpa::attn

#undef FFPA_SPLIT_FN
