package measure

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Latency summarises the durations of repeated operations.
type Latency struct {
	N      int
	Min    time.Duration
	Median time.Duration
	P90    time.Duration
	P99    time.Duration
	Max    time.Duration
	Mean   time.Duration
}

// Summarize sorts samples in place and summarises them.
func Summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Latency{
		N: len(samples), Min: samples[0], Max: samples[len(samples)-1],
		Median: quantile(samples, 0.50), P90: quantile(samples, 0.90), P99: quantile(samples, 0.99),
		Mean: sum / time.Duration(len(samples)),
	}
}

// quantile returns the q-quantile (nearest rank) of sorted samples.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Sample runs op warmup times untimed, then n times timed, and summarises
// the timed runs. It stops at the first error.
func Sample(n, warmup int, op func() error) (Latency, error) {
	ls, err := SampleAlternating(n, warmup, op)
	if err != nil {
		return Latency{}, err
	}
	return ls[0], nil
}

// SampleAlternating runs ops in turn, warmup rounds untimed and then n
// timed, and summarises each op's timed runs: one Latency per op, in the
// order given. Run by run rather than each in a block, the ops share the
// machine's drifts alike, and each run follows the same others: what ran
// just before an exec changes its time (docs/CONTAINERS.md, "ipc against
// a hello-world"). It stops at the first error.
func SampleAlternating(n, warmup int, ops ...func() error) ([]Latency, error) {
	for range warmup {
		for _, op := range ops {
			if err := op(); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	samples := make([][]time.Duration, len(ops))
	for i := range samples {
		samples[i] = make([]time.Duration, n)
	}
	for r := range n {
		for i, op := range ops {
			start := time.Now()
			if err := op(); err != nil {
				return nil, err
			}
			samples[i][r] = time.Since(start)
		}
	}
	ls := make([]Latency, len(ops))
	for i := range ops {
		ls[i] = Summarize(samples[i])
	}
	return ls, nil
}

// Median returns the median of xs (the lower middle for an even count), or
// zero for none.
func Median[T cmp.Ordered](xs []T) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
