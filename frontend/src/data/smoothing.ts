/**
 * Causal smoothing: each smoothed point depends only on the points at or before it, so new live
 * points never move what is already drawn (unlike centred windows). This is TensorBoard's
 * debiased exponential moving average: without the debias term the first points would be pulled
 * towards zero.
 */

/** weight in [0, 1): 0 returns the values unchanged. Nulls / NaN stay null and are skipped. */
export function causalEma(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight >= 0 && weight < 1)) throw new Error(`smoothing weight must be in [0, 1), got ${weight}`);
  const out: (number | null)[] = new Array(values.length);
  let acc = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    acc = acc * weight + (1 - weight) * v;
    n++;
    out[i] = weight === 0 ? v : acc / (1 - Math.pow(weight, n));
  }
  return out;
}
