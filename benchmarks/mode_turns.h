// The order in which a benchmark's compression modes take their turns, iteration by iteration.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ucclzip::bench {

// Which of `modes` compression modes (1 to 3) takes turn `turn` of iteration `iteration`. The
// orders cycle so that across the iterations' seams every mode follows every mode, itself
// included, equally often: whatever a call leaves behind (codec threads still busy, a GPU time
// slice, a receiver still decoding) then weighs on every mode alike. A plain rotation put auto
// after on in two calls of three with off,on,auto, and off after auto in two of three.
constexpr size_t ModeOfTurn(size_t iteration, size_t turn, size_t modes) {
  // Cycles of orders in which each ordered pair of modes (a mode and itself too) meets once
  // (two modes) or twice (three), found by a search over sequences of permutations.
  constexpr uint8_t kTwo[2][2] = {{0, 1}, {1, 0}};
  constexpr uint8_t kThree[6][3] = {{0, 1, 2}, {2, 0, 1}, {1, 0, 2}, {2, 1, 0}, {0, 2, 1}, {1, 2, 0}};
  switch (modes) {
    case 2:
      return kTwo[iteration % 2][turn];
    case 3:
      return kThree[iteration % 6][turn];
    default:
      return turn;  // one mode
  }
}

}  // namespace ucclzip::bench
