package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/planrun/planrun/metrics"
)

// FromSeries makes the result of a run that never finished (killed with
// SIGKILL, its machine lost) from the series file it wrote while it ran:
// every phase, count and latency percentile up to its last line. The
// result is marked interrupted; asserts and report tables, evaluated at
// the end of a run, are not in it.
func FromSeries(path string) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs, err := metrics.ReadSeries(f)
	if err != nil {
		if data, rerr := os.ReadFile(path); rerr == nil && !isSeries(path, data) && json.Valid(data) {
			return nil, fmt.Errorf("%s is a saved result, not a series file: leave out --from-series", path)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var res Result
	if err := json.Unmarshal(runs[0].Header.Result, &res); err != nil {
		return nil, fmt.Errorf("%s: the run's header: %w", path, err)
	}
	res.Runs = nil
	for _, r := range runs {
		h := r.Header
		end := h.Started.Add(time.Duration(r.Ended * float64(time.Second)))
		res.Runs = append(res.Runs, Run{Index: h.Index, Label: h.Label, Status: Interrupted,
			Error:   fmt.Sprintf("the run did not finish: what its series file holds, up to %s", clock(r.Ended)),
			Started: h.Started, Finished: end, Metrics: r.Metrics, Kinds: h.Kinds, Roles: h.Roles})
		res.Finished = end
	}
	last := res.Runs[len(res.Runs)-1]
	res.Status, res.Error = Interrupted, last.Error
	return &res, nil
}

// clock writes seconds since a run's start as hh:mm:ss, as progress lines do.
func clock(s float64) string {
	d := time.Duration(s) * time.Second
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// isSeries says whether a file is a series file rather than a result: named
// so, or opening with a run header line.
func isSeries(path string, data []byte) bool {
	if strings.HasSuffix(path, ".series.jsonl") {
		return true
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var l metrics.SeriesLine
	return json.Unmarshal(first, &l) == nil && l.Header != nil
}
