/** Statistics of timing samples, for the timing test and its benchmark (bench/authLookupTiming.ts). */

/**
 * Mann–Whitney U between two samples, as the normal approximation's z (ties get their mean rank). Rank
 * based, so a few outliers of a shared machine (a GC pause, another process) weigh no more than any sample.
 */
export function mannWhitneyZ(a: readonly number[], b: readonly number[]): number {
  const pooled = [...a.map((value) => ({ value, fromA: true })), ...b.map((value) => ({ value, fromA: false }))].sort(
    (x, y) => x.value - y.value,
  );
  let rankSumA = 0;
  let tieCorrection = 0;
  for (let start = 0; start < pooled.length; ) {
    let end = start;
    while (end + 1 < pooled.length && pooled[end + 1]!.value === pooled[start]!.value) end += 1;
    const meanRank = (start + end) / 2 + 1;
    const ties = end - start + 1;
    tieCorrection += ties ** 3 - ties;
    for (let index = start; index <= end; index += 1) if (pooled[index]!.fromA) rankSumA += meanRank;
    start = end + 1;
  }
  const [n1, n2] = [a.length, b.length];
  const n = n1 + n2;
  const u = rankSumA - (n1 * (n1 + 1)) / 2;
  const sigma = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieCorrection / (n * (n - 1))));
  return (u - (n1 * n2) / 2) / sigma;
}

/** The middle sample; of an even count, the mean of the two middle ones. Tests and benchmarks share it. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
