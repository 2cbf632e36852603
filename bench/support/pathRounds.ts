/**
 * The delivery path measured in rounds, each between two runs of the bare sender. On these shared machines
 * the bare sender's rate moved from 12,000 to 26,000/s between runs of one benchmark, and by a third between
 * its first and last run in one process: a single path phase against the mean of a run at the start and one
 * at the end put most of that into the ratio. Each round's ratio is to the two runs beside it, and the
 * benchmark reports their median.
 */
import { median } from '../../test/support/statistics.ts';

interface PathRound {
  readonly path_per_s: number;
  /** The mean of the bare sender's runs just before and just after the round. */
  readonly bare_per_s: number;
  readonly ratio: number;
}

export interface PathRounds {
  readonly rounds: PathRound[];
  readonly medianRatio: number;
  /** Every run of the bare sender, the first one included. */
  readonly bareRuns: number[];
}

/**
 * `drain(round)` prepares round `round` (the first is ready when this is called) and returns the path's
 * rate; `bareSender()` runs the baseline once and returns its rate. `firstBare` is the run before round 0.
 */
export async function measurePathRounds(
  rounds: number,
  firstBare: number,
  drain: (round: number) => Promise<number>,
  bareSender: () => Promise<number>,
): Promise<PathRounds> {
  const bareRuns = [firstBare];
  const measured: PathRound[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const path = await drain(round);
    bareRuns.push(await bareSender());
    const bare = (bareRuns.at(-2)! + bareRuns.at(-1)!) / 2;
    measured.push({ path_per_s: Math.round(path), bare_per_s: Math.round(bare), ratio: Number((path / bare).toFixed(2)) });
  }
  const medianRatio = Number(median(measured.map((round) => round.ratio)).toFixed(2));
  return { rounds: measured, medianRatio, bareRuns };
}
