// Command planrun runs message-broker performance procedures written as
// YAML plans and prints the tables the procedures ask for.
package main

// The README's reference tables come from the components' struct tags.
//go:generate go run . explain --readme README.md
//go:generate sh -c "go run . schema > planrun.schema.json"

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/planrun/planrun/cluster"
	"github.com/planrun/planrun/cluster/certs"
	"github.com/planrun/planrun/docs"
	"github.com/planrun/planrun/engine"
	"github.com/planrun/planrun/kube"
	"github.com/planrun/planrun/live"
	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/results"
	"github.com/planrun/planrun/yamldecode"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes, as the README documents them.
const (
	exitOK         = 0
	exitAssert     = 1
	exitBadPlan    = 2
	exitRunFailure = 3
)

const usage = `planrun runs message-broker load-test plans.

Usage:
  planrun [flags] PLAN.yaml            run a plan (same as: planrun run PLAN.yaml)
  planrun run [flags] PLAN.yaml
  planrun validate PLAN.yaml...        check plans without contacting anything
  planrun report [--out DIR] RESULT.json   write the reports again from a saved result
  planrun report --from-series [--out DIR] SERIES.jsonl
                                       write the reports of a run that never finished
                                       (killed, machine lost) from its series file
  planrun report --check RESULT.json   check a saved result's figures against every
                                       invariant (phases add up to the run, ...):
                                       exit 0 when they hold, 1 listing violations,
                                       2 for a file that is not a result
  planrun compare [--all] [--floor 1%] [--floor 0.5ms] [--fail-if EXPR]... A.json B.json
                                       the figures of two saved results that differ
                                       beyond the floors (--all: every figure), with the
                                       change in percent; --fail-if 'p99 > +10%' exits 1
                                       naming the figures that break it (see the README)
  planrun explain [KIND] [NAME]        what a driver, workload kind, step, collector or plan
                                       section does and every key it takes (explain kafka,
                                       explain step wait); without a name, the list
  planrun schema                       print the JSON Schema of plan files (for editors)
  planrun worker --listen ADDR [--token TOKEN] [--tls-cert F --tls-key F --tls-ca F]
                                       hold workload shards for a conductor
                                       (planrun run --workers); see the README
  planrun certs DIR [--ip IP]... [--dns NAME]... [--valid D]
                                       make a CA, a worker and a conductor
                                       certificate for the control channel's TLS
  planrun kube run|render PLAN.yaml --workers N   run a plan on Kubernetes
                                       (planrun kube help)
  planrun version

Flags (before or after the plan):
  --set name=value   override a plan variable (repeatable); for a matrix
                     variable, a comma-separated list of the values to run
  --out DIR          where report files go (default: reports)
  --quiet            no progress lines, only the final report
  --metrics-addr ADDR  serve the live figures in Prometheus format at ADDR/metrics
                     during the run (for example :9464)
  --dashboard ADDR   serve a live page of the run at http://ADDR/, updated every
                     second, showing the final report at the end; :8080 means
                     127.0.0.1:8080 (this machine only): give a host, such as
                     0.0.0.0:8080, to let other hosts in (no authentication)
  --connect-timeout D  how long opening a target or creating a topic may take
                     (default 60s)
  --workers LIST     run the workloads on these planrun workers (host:port,
                     comma-separated; also PLANRUN_WORKERS or the plan's
                     workers: key); this process conducts
  --token TOKEN      shared secret between conductor and workers (also
                     PLANRUN_TOKEN)
  --listen ADDR      worker: where to accept the conductor (host:port)
  --tls-cert FILE, --tls-key FILE, --tls-ca FILE
                     worker and conductor: TLS 1.3 on the control channel,
                     this side's certificate and key and the CA both trust
                     (also PLANRUN_TLS_CERT, PLANRUN_TLS_KEY, PLANRUN_TLS_CA;
                     planrun certs makes them)
  --tls-server-name NAME  conductor: the name workers' certificates must hold
                     (default planrun-worker)
  --insecure         worker: serve plain TCP beyond loopback (warned on every
                     connection)
  --stop-timeout D   how long stopping the workloads and closing the targets
                     may take at the end of a run or after an interrupt
                     (default 30s)

Exit codes: 0 success, 1 an assert failed, 2 invalid plan or usage,
3 run-time failure (broker unreachable, step timed out, interrupted).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type cli struct {
	cmd         string
	sets        map[string]string
	out         string
	quiet       bool
	metricsAddr string
	dashboard   string // --dashboard: where to serve the live page
	// connectTimeout and stopTimeout bound opening targets and stopping
	// workloads; zero leaves the engine's defaults.
	connectTimeout, stopTimeout time.Duration
	readme                      string // explain --readme: the README whose tables to regenerate
	fromSeries                  bool   // report --from-series
	check                       bool   // report --check
	workers                     string // --workers: host:port list
	token                       string
	listen                      string
	all                         bool     // compare --all
	failIf                      []string // compare --fail-if
	floors                      []string // compare --floor
	args                        []string

	tls      cluster.TLSFiles // --tls-cert, --tls-key, --tls-ca, --tls-server-name
	insecure bool             // worker --insecure
}

func parseArgs(args []string) (*cli, error) {
	c := &cli{sets: map[string]string{}, out: "reports"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		switch name {
		case "--set", "-set", "-s":
			v, err := next()
			if err != nil {
				return nil, err
			}
			k, vv, ok := strings.Cut(v, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--set %q: write --set name=value", v)
			}
			c.sets[k] = vv
		case "--out", "-out", "-o":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.out = v
		case "--metrics-addr", "-metrics-addr":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.metricsAddr = v
		case "--dashboard", "-dashboard":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.dashboard = v
		case "--connect-timeout", "-connect-timeout", "--stop-timeout", "-stop-timeout":
			v, err := next()
			if err != nil {
				return nil, err
			}
			d, err := yamldecode.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s %q: give a duration such as 30s or 2m", name, v)
			}
			if strings.Contains(name, "connect") {
				c.connectTimeout = d
			} else {
				c.stopTimeout = d
			}
		case "--workers", "-workers", "--token", "-token", "--listen", "-listen":
			v, err := next()
			if err != nil {
				return nil, err
			}
			switch strings.TrimLeft(name, "-") {
			case "workers":
				c.workers = v
			case "token":
				c.token = v
			default:
				c.listen = v
			}
		case "--tls-cert", "-tls-cert", "--tls-key", "-tls-key", "--tls-ca", "-tls-ca", "--tls-server-name", "-tls-server-name":
			v, err := next()
			if err != nil {
				return nil, err
			}
			switch strings.TrimLeft(name, "-") {
			case "tls-cert":
				c.tls.Cert = v
			case "tls-key":
				c.tls.Key = v
			case "tls-ca":
				c.tls.CA = v
			default:
				c.tls.ServerName = v
			}
		case "--insecure", "-insecure":
			c.insecure = true
		case "--readme", "-readme":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.readme = v
		case "--fail-if", "-fail-if":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.failIf = append(c.failIf, v)
		case "--floor", "-floor":
			v, err := next()
			if err != nil {
				return nil, err
			}
			c.floors = append(c.floors, v)
		case "--all", "-all":
			c.all = true
		case "--quiet", "-quiet", "-q":
			c.quiet = true
		case "--from-series", "-from-series":
			c.fromSeries = true
		case "--check", "-check":
			c.check = true
		case "-h", "--help", "-help":
			c.cmd = "help"
		default:
			if strings.HasPrefix(a, "-") && a != "-" {
				return nil, fmt.Errorf("unknown flag %s", a)
			}
			c.args = append(c.args, a)
		}
	}
	if c.cmd == "" {
		if len(c.args) > 0 && slices.Contains(commands, c.args[0]) {
			c.cmd, c.args = c.args[0], c.args[1:]
		}
		if c.cmd == "" {
			c.cmd = "run"
			if len(c.args) > 0 && !isPlanFile(c.args[0]) {
				// planrun PLAN.yaml runs a plan: a first word that is no
				// file is a command mistyped.
				a := c.args[0]
				if hint := yamldecode.Suggest(a, commands); hint != "" {
					return nil, fmt.Errorf("unknown command %q%s", a, hint)
				}
				return nil, fmt.Errorf("%q is neither a command nor a plan file; commands: %s", a, strings.Join(commands, ", "))
			}
		}
	}
	return c, nil
}

// commands are planrun's commands; a plan file given alone is run.
var commands = []string{"run", "validate", "report", "compare", "explain", "schema", "worker", "kube", "certs", "version", "help"}

// isPlanFile says whether a first argument names a plan: a file that
// exists, or a name ending in .yaml or .yml (an error says it is missing).
func isPlanFile(a string) bool {
	if ext := strings.ToLower(filepath.Ext(a)); ext == ".yaml" || ext == ".yml" || strings.ContainsRune(a, os.PathSeparator) {
		return true
	}
	_, err := os.Stat(a)
	return err == nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "kube" {
		return kube.Main(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "certs" {
		return makeCerts(args[1:], stdout, stderr)
	}
	c, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n\n%s", err, usage)
		return exitBadPlan
	}
	switch c.cmd {
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version":
		fmt.Fprintf(stdout, "planrun %s\n", version)
		return exitOK
	case "validate":
		return validate(c, stdout, stderr)
	case "report":
		return report(c, stdout, stderr)
	case "compare":
		return compare(c, stdout, stderr)
	case "explain":
		return explain(c, stdout, stderr)
	case "schema":
		return schema(stdout, stderr)
	case "worker":
		return worker(c, stdout, stderr)
	}
	if len(c.args) != 1 {
		fmt.Fprintf(stderr, "planrun: run takes one plan file\n\n%s", usage)
		return exitBadPlan
	}
	env := &cluster.EnvOf{}
	src, plans, err := plan.Load(c.args[0], plan.Options{Set: c.sets, Formats: reporters.Names(), LookupEnv: env.Lookup})
	if err != nil {
		plan.PrintError(stderr, err)
		return exitBadPlan
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "planrun: --out %s: %v\n", c.out, err)
		return exitBadPlan
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		// A second signal means the user will not wait for a clean stop.
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		select {
		case <-again:
			fmt.Fprintln(stderr, "planrun: second interrupt, exiting without writing reports")
			os.Exit(exitRunFailure)
		case <-done:
		}
	}()
	progress := stderr
	if c.quiet {
		progress = io.Discard
	}
	eng := &engine.Engine{Out: progress, Version: version, ConnectTimeout: c.connectTimeout, StopTimeout: c.stopTimeout}
	if addrs := workerList(c, src); len(addrs) > 0 {
		data, err := os.ReadFile(c.args[0])
		if err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
		tc, err := conductorTLS(c)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
		cond := &cluster.Conductor{Addrs: addrs, Token: tokenOf(c), Version: version, File: c.args[0], Source: data,
			Set: c.sets, Env: env.Seen, Out: progress, StopTimeout: c.stopTimeout, TLS: tc}
		if err := cond.Check(plans); err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
		if err := cond.Join(ctx); err != nil {
			fmt.Fprintf(stderr, "planrun: workers: %v\n", err)
			return exitRunFailure
		}
		defer cond.Close()
		eng.Remote = cond
	}
	seriesPath := filepath.Join(c.out, plans[0].FileName("{name}")+".series.jsonl")
	if f, err := os.Create(seriesPath); err == nil {
		defer f.Close()
		eng.Series = f
	} else {
		fmt.Fprintf(stderr, "planrun: per-second series will only be in the JSON result: %v\n", err)
	}
	if c.metricsAddr != "" {
		ln, err := net.Listen("tcp", c.metricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: --metrics-addr %s: %v\n", c.metricsAddr, err)
			return exitBadPlan
		}
		lctx, lcancel := context.WithCancel(context.Background())
		defer lcancel()
		go func() { _ = live.ServeListener(lctx, ln, eng.Current) }()
		fmt.Fprintf(progress, "live metrics on http://%s/metrics\n", ln.Addr())
	}
	var page *live.Page
	if c.dashboard != "" {
		ln, remote, err := live.ListenPage(c.dashboard)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: --dashboard %s: %v\n", c.dashboard, err)
			return exitBadPlan
		}
		page = &live.Page{}
		eng.Observer = page
		// The page is served until the process exits, so that it shows
		// the final report.
		pctx, pcancel := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() { defer close(served); _ = live.ServePage(pctx, ln, page) }()
		// Open pages get the final report before the process exits.
		defer func() { pcancel(); <-served }()
		fmt.Fprintf(stderr, "live page on http://%s/\n", ln.Addr())
		if remote {
			fmt.Fprintf(stderr, "planrun: warning: the live page at %s is open to other hosts, with no authentication\n", ln.Addr())
		}
	}
	res := eng.Execute(ctx, src, plans)
	if page != nil {
		// Before the reports are written: they may leave the series out.
		page.Finish(res)
	}
	paths, werr := writeReports(res, plans[0], c.out)
	// Standard output gets the markdown file as written (with its chart
	// links); rendered afresh only if the file could not be written.
	printed := false
	for _, p := range paths {
		if strings.HasSuffix(p, ".md") {
			if data, err := os.ReadFile(p); err == nil {
				_, _ = stdout.Write(data)
				printed = true
			}
		}
	}
	if !printed {
		reporters.Render(stdout, res)
	}
	for _, p := range paths {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if werr != nil {
		fmt.Fprintf(stderr, "planrun: writing reports: %v\n", werr)
		return exitRunFailure
	}
	switch res.Status {
	case results.Passed:
		return exitOK
	case results.AssertFail:
		return exitAssert
	}
	fmt.Fprintf(stderr, "planrun: %s: %s\n", res.Status, res.Error)
	return exitRunFailure
}

func validate(c *cli, stdout, stderr io.Writer) int {
	if len(c.args) == 0 {
		fmt.Fprintf(stderr, "planrun: validate takes one or more plan files\n")
		return exitBadPlan
	}
	code := exitOK
	for _, f := range c.args {
		_, plans, err := plan.Load(f, plan.Options{Set: c.sets, Formats: reporters.Names()})
		if err != nil {
			plan.PrintError(stderr, err)
			code = exitBadPlan
			continue
		}
		runs := ""
		if len(plans) > 1 {
			runs = fmt.Sprintf(" (%d matrix runs)", len(plans))
		}
		fmt.Fprintf(stdout, "%s: ok%s\n", f, runs)
	}
	return code
}

// writeReports writes the JSON and markdown files and any extra formats.
func writeReports(res *results.Result, p *plan.Plan, dir string) ([]string, error) {
	var paths []string
	var errs []error
	if !keepSeries(p) {
		for i := range res.Runs {
			res.Runs[i].Metrics.Series = nil
			res.Runs[i].Metrics.ExtraSeries = nil
		}
	}
	// Extra formats first, so the markdown report can link the charts.
	type output struct{ name, pattern string }
	var outputs []output
	for _, f := range p.Report.Formats {
		outputs = append(outputs, output{f, p.Report.Markdown})
	}
	outputs = append(outputs, output{"json", p.Report.JSON}, output{"markdown", p.Report.Markdown}, output{"html", p.Report.Markdown})
	for _, o := range outputs {
		rep, ok := reporters.Lookup(o.name)
		if o.name == "html" {
			// Not a format a plan chooses: the HTML report is written
			// beside the markdown, always.
			rep, ok = reporters.HTML{}, true
		}
		if !ok {
			errs = append(errs, fmt.Errorf("no reporter %q; known: %s", o.name, strings.Join(reporters.Names(), ", ")))
			continue
		}
		base := filepath.Join(dir, strings.TrimSuffix(p.FileName(o.pattern), filepath.Ext(p.FileName(o.pattern))))
		if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		path, err := rep.Write(res, base)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.name, err))
			continue
		}
		paths = append(paths, path)
	}
	return paths, errors.Join(errs...)
}

func keepSeries(p *plan.Plan) bool { return p.Report.Series == nil || *p.Report.Series }

func report(c *cli, stdout, stderr io.Writer) int {
	if len(c.args) != 1 {
		fmt.Fprintf(stderr, "planrun: report takes one saved result (a .json file written by a run, or with --from-series a .series.jsonl file)\n")
		return exitBadPlan
	}
	load := results.Load
	if c.fromSeries {
		load = results.FromSeries
	}
	res, err := load(c.args[0])
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitBadPlan
	}
	if c.check {
		return checkResult(res, c.args[0], stdout)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "planrun: --out %s: %v\n", c.out, err)
		return exitBadPlan
	}
	base := filepath.Join(c.out, res.Plan)
	if c.fromSeries {
		// The run wrote no result: this one can be reported and compared again.
		jpath, err := reporters.JSON{}.Write(res, base)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitRunFailure
		}
		fmt.Fprintf(stderr, "wrote %s\n", jpath)
	}
	path, err := reporters.Markdown{}.Write(res, base)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitRunFailure
	}
	reporters.Render(stdout, res)
	fmt.Fprintf(stderr, "wrote %s\n", path)
	hpath, err := reporters.HTML{}.Write(res, base)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitRunFailure
	}
	fmt.Fprintf(stderr, "wrote %s\n", hpath)
	return exitOK
}

// checkResult runs every invariant over a saved result: exit 0 when its
// figures hold them all, 1 listing every violation.
func checkResult(res *results.Result, path string, stdout io.Writer) int {
	rep := res.Check()
	applied := len(results.Checks()) - len(rep.NotApplied)
	fmt.Fprintf(stdout, "%s: result format %d, %d checks of %d apply\n", path, rep.Version, applied, len(results.Checks()))
	for _, c := range results.Checks() {
		if c.Since > rep.Version {
			fmt.Fprintf(stdout, "does not apply: %s (results of format %d and later; this one is older)\n", c.Name, c.Since)
		}
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(stdout, "violation: %s\n", v)
	}
	if len(rep.Violations) > 0 {
		fmt.Fprintf(stdout, "%d violations\n", len(rep.Violations))
		return exitAssert
	}
	fmt.Fprintf(stdout, "every check holds\n")
	return exitOK
}

func compare(c *cli, stdout, stderr io.Writer) int {
	if len(c.args) != 2 {
		fmt.Fprintf(stderr, "planrun: compare takes two saved results: planrun compare A.json B.json\n")
		return exitBadPlan
	}
	var rs [2]*results.Result
	for i, f := range c.args {
		r, err := results.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
		rs[i] = r
	}
	opt := reporters.CompareOptions{All: c.all, Floors: reporters.DefaultFloors}
	for _, f := range c.floors {
		if err := opt.Floors.ParseFloor(f); err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
	}
	for _, e := range c.failIf {
		rule, err := reporters.ParseRule(e)
		if err != nil {
			fmt.Fprintf(stderr, "planrun: %v\n", err)
			return exitBadPlan
		}
		opt.Rules = append(opt.Rules, rule)
	}
	breaches, err := reporters.Compare(stdout, rs[0], rs[1], opt)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitBadPlan
	}
	if len(breaches) > 0 {
		fmt.Fprintf(stderr, "planrun: %d figures break a --fail-if rule:\n", len(breaches))
		for _, b := range breaches {
			fmt.Fprintf(stderr, "  %s: %s: %s\n", b.Rule, b.Row, b.Reason)
		}
		return exitAssert
	}
	return exitOK
}

func explain(c *cli, stdout, stderr io.Writer) int {
	if c.readme != "" {
		return updateReadme(c.readme, stderr)
	}
	if len(c.args) == 0 {
		docs.List(stdout)
		return exitOK
	}
	cs, err := docs.Find(c.args)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitBadPlan
	}
	for i, comp := range cs {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		docs.Text(stdout, comp)
	}
	return exitOK
}

// schema prints the JSON Schema of plan files.
func schema(stdout, stderr io.Writer) int {
	out, err := docs.Schema()
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitRunFailure
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}

// updateReadme regenerates the README's reference tables (go generate).
func updateReadme(path string, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitBadPlan
	}
	out, err := docs.UpdateReadme(string(data))
	if err == nil {
		err = os.WriteFile(path, []byte(out), 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "planrun: %v\n", err)
		return exitRunFailure
	}
	return exitOK
}

// workerList is where the workloads run: --workers, else PLANRUN_WORKERS,
// else the plan's workers: key; empty means in this process.
func workerList(c *cli, src *plan.Source) []string {
	list := c.workers
	if list == "" {
		list = os.Getenv("PLANRUN_WORKERS")
	}
	if list == "" {
		return src.Workers
	}
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func tokenOf(c *cli) string {
	if c.token != "" {
		return c.token
	}
	return os.Getenv("PLANRUN_TOKEN")
}

// worker serves conductors until SIGTERM or an interrupt.
func worker(c *cli, stdout, stderr io.Writer) int {
	if c.listen == "" {
		fmt.Fprintf(stderr, "planrun: worker needs --listen host:port\n")
		return exitBadPlan
	}
	files := tlsFiles(c)
	var tc *tls.Config
	if files.Given() {
		var err error
		if tc, err = cluster.WorkerTLS(files); err != nil {
			fmt.Fprintf(stderr, "planrun: worker: %v\n", err)
			return exitBadPlan
		}
	} else if !c.insecure && !cluster.Loopback(c.listen) {
		fmt.Fprintf(stderr, "planrun: worker: --listen %s: %v\n", c.listen, cluster.ErrPlainListen)
		return exitBadPlan
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		fmt.Fprintf(stderr, "planrun: worker: --listen %s: %v\n", c.listen, err)
		return exitBadPlan
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &cluster.Worker{Token: tokenOf(c), Version: version, Out: stderr, ConnectTimeout: c.connectTimeout, StopTimeout: c.stopTimeout,
		TLS: tc, Insecure: c.insecure}
	fmt.Fprintf(stdout, "worker listening on %s\n", ln.Addr())
	switch {
	case tc != nil:
		fmt.Fprintf(stderr, "worker: TLS 1.3; a conductor needs a client certificate signed by %s\n", files.CA)
	case !cluster.Loopback(ln.Addr().String()) && w.Token == "":
		fmt.Fprintf(stderr, "worker: WARNING: plain TCP beyond loopback (--insecure) and no token: any conductor that reaches this port can drive the worker, and the plan and its secrets cross the network readable\n")
	case !cluster.Loopback(ln.Addr().String()):
		fmt.Fprintf(stderr, "worker: WARNING: plain TCP beyond loopback (--insecure): the plan, its secrets and the token cross the network readable\n")
	}
	if err := w.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "planrun: worker: %v\n", err)
		return exitRunFailure
	}
	return exitOK
}

// tlsFiles are the control channel's TLS files: the flags, else
// PLANRUN_TLS_CERT, PLANRUN_TLS_KEY and PLANRUN_TLS_CA.
func tlsFiles(c *cli) cluster.TLSFiles {
	f := c.tls
	for _, e := range []struct {
		v   *string
		env string
	}{{&f.Cert, "PLANRUN_TLS_CERT"}, {&f.Key, "PLANRUN_TLS_KEY"}, {&f.CA, "PLANRUN_TLS_CA"}} {
		if *e.v == "" {
			*e.v = os.Getenv(e.env)
		}
	}
	return f
}

// conductorTLS is the conductor's TLS configuration, nil without files.
func conductorTLS(c *cli) (*tls.Config, error) {
	files := tlsFiles(c)
	if !files.Given() {
		if files.ServerName != "" {
			return nil, errors.New("--tls-server-name needs --tls-cert, --tls-key and --tls-ca")
		}
		return nil, nil
	}
	return cluster.ConductorTLS(files)
}

// makeCerts writes a CA certificate and the worker's and conductor's
// certificates and keys into a folder: planrun certs DIR [--ip IP]...
// [--dns NAME]... [--valid D], flags before or after DIR.
func makeCerts(args []string, stdout, stderr io.Writer) int {
	const use = "planrun certs DIR [--ip IP]... [--dns NAME]... [--valid D]"
	fs := flag.NewFlagSet("planrun certs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o certs.Options
	fs.Func("ip", "", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			ip := net.ParseIP(strings.TrimSpace(a))
			if ip == nil {
				return fmt.Errorf("%q is not an IP address (names go to --dns)", a)
			}
			o.IPs = append(o.IPs, ip)
		}
		return nil
	})
	fs.Func("dns", "", func(v string) error {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Names = append(o.Names, n)
			}
		}
		return nil
	})
	fs.Func("valid", "", func(v string) (err error) {
		if o.Valid, err = yamldecode.ParseDuration(v); err != nil || o.Valid <= 0 {
			return fmt.Errorf("give a duration such as 30d or 8760h")
		}
		return nil
	})
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			fmt.Fprintf(stderr, "planrun: certs: %v\nusage: %s\n", err, use)
			return exitBadPlan
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "planrun: certs takes one folder: %s\n", use)
		return exitBadPlan
	}
	dir := pos[0]
	set, err := certs.Generate(o)
	if err == nil {
		err = set.Write(dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "planrun: certs: %v\n", err)
		return exitRunFailure
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	fmt.Fprintf(stdout, "wrote %s, %s, %s, %s, %s (the CA's key is not kept: run planrun certs again for new certificates)\n",
		p(certs.CAFile), p(certs.WorkerCertFile), p(certs.WorkerKeyFile), p(certs.ConductorCertFile), p(certs.ConductorKeyFile))
	fmt.Fprintf(stdout, "workers:   planrun worker --listen HOST:7070 --tls-cert %s --tls-key %s --tls-ca %s\n",
		p(certs.WorkerCertFile), p(certs.WorkerKeyFile), p(certs.CAFile))
	fmt.Fprintf(stdout, "conductor: planrun run --workers HOST:7070,... --tls-cert %s --tls-key %s --tls-ca %s PLAN.yaml\n",
		p(certs.ConductorCertFile), p(certs.ConductorKeyFile), p(certs.CAFile))
	return exitOK
}
