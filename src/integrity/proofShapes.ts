/**
 * Which subtrees make up RFC 9162 proofs, independent of where hashes are stored. A range [start, end) of
 * leaves stands for MTH(D[start:end]); every range these functions return is either a complete subtree
 * (aligned, a power of two long) or the right edge of one, as RFC 9162's recursion produces them.
 *
 * Sizes are numbers, not bigints: a tenant would need 2^53 events to overflow them. Bitwise operators
 * would truncate at 2^32, so the arithmetic is plain.
 */

export interface LeafRange {
  readonly start: number;
  readonly end: number;
}

/** A complete subtree: leaves [index·2^level, (index+1)·2^level). */
export interface TreeNode {
  readonly level: number;
  readonly index: number;
}

/** The largest power of two strictly smaller than n (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** PATH(m, D[n]) of RFC 9162 §2.1.3.1, from the leaf upwards. */
export function inclusionRanges(leafIndex: number, treeSize: number): LeafRange[] {
  const ranges: LeafRange[] = [];
  const path = (m: number, start: number, end: number): void => {
    const n = end - start;
    if (n === 1) return;
    const k = splitPoint(n);
    if (m < k) {
      path(m, start, start + k);
      ranges.push({ start: start + k, end });
    } else {
      path(m - k, start + k, end);
      ranges.push({ start, end: start + k });
    }
  };
  path(leafIndex, 0, treeSize);
  return ranges;
}

/** PROOF(m, D[n]) of RFC 9162 §2.1.4.1, for 1 ≤ first ≤ second. */
export function consistencyRanges(first: number, second: number): LeafRange[] {
  const ranges: LeafRange[] = [];
  const subproof = (m: number, start: number, end: number, complete: boolean): void => {
    const n = end - start;
    if (m === n) {
      if (!complete) ranges.push({ start, end });
      return;
    }
    const k = splitPoint(n);
    if (m <= k) {
      subproof(m, start, start + k, complete);
      ranges.push({ start: start + k, end });
    } else {
      subproof(m - k, start + k, end, false);
      ranges.push({ start, end: start + k });
    }
  };
  subproof(first, 0, second, true);
  return ranges;
}

/**
 * The complete subtrees whose hashes, folded from the right, give MTH of the range: greedy from the left,
 * the largest aligned subtree that fits. For the ranges RFC 9162's recursion produces (and for [0, n)),
 * these are the binary decomposition of the range's length, largest first.
 */
export function completeSubtrees(range: LeafRange): TreeNode[] {
  const nodes: TreeNode[] = [];
  let start = range.start;
  while (start < range.end) {
    let size = 1;
    let level = 0;
    while (start % (size * 2) === 0 && start + size * 2 <= range.end) {
      size *= 2;
      level += 1;
    }
    nodes.push({ level, index: start / size });
    start += size;
  }
  return nodes;
}
