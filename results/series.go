package results

import (
	"encoding/json"
	"fmt"
	"os"
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
