package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/planrun/planrun/plan"
	"github.com/planrun/planrun/reporters"
	"github.com/planrun/planrun/yamldecode"
)

// Exit codes, as the README documents them.
const (
	exitOK         = 0
	exitBadPlan    = 2
	exitRunFailure = 3
)

// Usage is the help of `planrun kube`.
const Usage = `planrun kube runs a plan on Kubernetes.

Usage:
  planrun kube run PLAN.yaml --workers N [flags]
        create the plan's ConfigMap, a Secret (token, TLS certificates), a headless Service, an
        Indexed Job of N workers and the conductor's Job; wait for the
        workers; stream the conductor's log; write the report to --out;
        delete everything (also on Ctrl-C)
  planrun kube render PLAN.yaml --workers N [flags]
        print the same objects as YAML (without the Secret: the header says
        how to make it)
  planrun kube unpack [--out DIR] < conductor.log
        write the report a conductor's log carries to DIR
  planrun kube conduct --workers H:P,... [--out DIR] PLAN.yaml [run flags]
        what the conductor's pod runs (not for direct use)

Flags of run and render:
  --workers N          worker pods (required)
  --image IMG          the planrun image (default: $PLANRUN_IMAGE)
  --namespace NS       (default: the kubeconfig context's namespace, else default)
  --context NAME       kubeconfig context (default: the current one)
  --set name=value     plan variable, passed to the conductor (repeatable)
  --out DIR            where the report goes (run; default: reports)
  --run-id ID          names and labels the objects (default: random)
  --cpu Q, --memory Q  each worker's request and limit (default 2, 2Gi)
  --conductor-cpu Q, --conductor-memory Q   the conductor's (default 1, 1Gi)
  --spread preferred|required   one worker per node, preferred (default) or required
  --port P             the workers' control port (default 7070)
  --pull-policy P      Always, IfNotPresent or Never (default: Kubernetes')
  --service-account SA run the pods as SA
  --deadline D         end the Jobs after D whatever happens (e.g. 2h)
  --ready-timeout D    how long pods may take to start (run; default 5m)
  --insecure           plain TCP between conductor and workers instead of TLS
                       with certificates made for the run

The kubeconfig comes from KUBECONFIG, else ~/.kube/config, else the
in-cluster service account.
`

type setFlag map[string]string

func (s setFlag) String() string { return "" }
func (s setFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("write --set name=value")
	}
	s[k] = val
	return nil
}

type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string { return "" }
func (f durationFlag) Set(v string) error {
	d, err := yamldecode.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("give a duration such as 30s or 2h")
	}
	*f.d = d
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

type options struct {
	spec         Spec
	out          string
	context      string
	readyTimeout time.Duration
	deadline     time.Duration
}

func newFlags(name string, o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("planrun kube "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage) }
	o.spec.Sets = setFlag{}
	fs.IntVar(&o.spec.Workers, "workers", 0, "")
	fs.StringVar(&o.spec.Image, "image", os.Getenv("PLANRUN_IMAGE"), "")
	fs.StringVar(&o.spec.Namespace, "namespace", "", "")
	fs.StringVar(&o.context, "context", "", "")
	fs.Var(setFlag(o.spec.Sets), "set", "")
	fs.StringVar(&o.out, "out", "reports", "")
	fs.StringVar(&o.spec.RunID, "run-id", "", "")
	fs.StringVar(&o.spec.WorkerCPU, "cpu", "", "")
	fs.StringVar(&o.spec.WorkerMemory, "memory", "", "")
	fs.StringVar(&o.spec.ConductorCPU, "conductor-cpu", "", "")
	fs.StringVar(&o.spec.ConductorMemory, "conductor-memory", "", "")
	fs.StringVar(&o.spec.Spread, "spread", "preferred", "")
	port := 7070
	fs.Func("port", "", func(v string) error {
		_, err := fmt.Sscanf(v, "%d", &port)
		o.spec.Port = int32(port)
		return err
	})
	fs.Func("pull-policy", "", func(v string) error {
		switch v {
		case "Always", "IfNotPresent", "Never":
			o.spec.PullPolicy = corev1.PullPolicy(v)
			return nil
		}
		return fmt.Errorf("give Always, IfNotPresent or Never")
	})
	fs.StringVar(&o.spec.ServiceAccount, "service-account", "", "")
	fs.BoolVar(&o.spec.Insecure, "insecure", false, "")
	fs.Var(durationFlag{&o.deadline}, "deadline", "")
	o.readyTimeout = 5 * time.Minute
	fs.Var(durationFlag{&o.readyTimeout}, "ready-timeout", "")
	return fs
}

// Main runs `planrun kube ARGS`; it returns the process's exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, Usage)
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "run", "render":
		return runOrRender(ctx, args[0], args[1:], stdout, stderr)
	case "conduct":
		return conduct(ctx, args[1:], stdout, stderr)
	case "unpack":
		return unpackCmd(args[1:], os.Stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "planrun kube: unknown command %q\n\n%s", args[0], Usage)
	return exitBadPlan
}

func runOrRender(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlags(cmd, &o, stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitBadPlan
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "planrun kube %s: give one plan file\n", cmd)
		return exitBadPlan
	}
	if o.spec.Workers == 0 {
		fmt.Fprintf(stderr, "planrun kube %s: give --workers N\n", cmd)
		return exitBadPlan
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube %s: %v\n", cmd, err)
		return exitBadPlan
	}
	// The plan is checked here, before anything is created.
	if _, _, err := plan.Parse(pos[0], data, plan.Options{Set: o.spec.Sets, Formats: reporters.Names()}); err != nil {
		plan.PrintError(stderr, err)
		return exitBadPlan
	}
	o.spec.Plan, o.spec.PlanFile = data, filepath.Base(pos[0])
	o.spec.Deadline = int64(o.deadline / time.Second)
	if o.spec.RunID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.spec.RunID = hex.EncodeToString(b)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{CurrentContext: o.context})
	if o.spec.Namespace == "" {
		if ns, _, err := cc.Namespace(); err == nil && ns != "" {
			o.spec.Namespace = ns
		} else {
			o.spec.Namespace = "default"
		}
	}
	if cmd == "render" {
		m, err := Build(o.spec)
		if err != nil {
			fmt.Fprintf(stderr, "planrun kube render: %v\n", err)
			return exitBadPlan
		}
		if err := Render(stdout, o.spec, m); err != nil {
			fmt.Fprintf(stderr, "planrun kube render: %v\n", err)
			return exitRunFailure
		}
		return exitOK
	}
	if _, err := Build(o.spec); err != nil {
		fmt.Fprintf(stderr, "planrun kube run: %v\n", err)
		return exitBadPlan
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "planrun kube run: --out %s: %v\n", o.out, err)
		return exitBadPlan
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube run: no cluster to talk to: %v\n", err)
		return exitRunFailure
	}
	client, err := newClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube run: %v\n", err)
		return exitRunFailure
	}
	r := &Runner{Client: client, Log: stderr, ReadyTimeout: o.readyTimeout}
	u, err := r.Run(ctx, o.spec, o.out)
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube run: %v\n", err)
		return exitRunFailure
	}
	printMarkdown(u.Files, stdout, stderr)
	return u.Exit
}

// printMarkdown prints the markdown reports that came back, as `planrun
// run` prints its own, and names every file.
func printMarkdown(files []string, stdout, stderr io.Writer) {
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			if data, err := os.ReadFile(f); err == nil {
				_, _ = stdout.Write(data)
			}
		}
	}
	for _, f := range files {
		fmt.Fprintf(stderr, "wrote %s\n", f)
	}
}

func conduct(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("planrun kube conduct", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.String("workers", "", "")
	out := fs.String("out", ReportDir, "")
	wait := 5 * time.Minute
	fs.Var(durationFlag{&wait}, "wait", "")
	// Its own flags come first; everything else goes to `planrun run`.
	var rest []string
	for i := 0; i < len(args); i++ {
		name, _, hasVal := strings.Cut(args[i], "=")
		if (name != "--workers" && name != "--out" && name != "--wait") || (!hasVal && i+1 >= len(args)) {
			rest = args[i:]
			break
		}
		v := strings.TrimPrefix(args[i], name+"=")
		if !hasVal {
			i++
			v = args[i]
		}
		if err := fs.Set(strings.TrimPrefix(name, "--"), v); err != nil {
			fmt.Fprintf(stderr, "planrun kube conduct: %s: %v\n", name, err)
			return exitBadPlan
		}
	}
	if *workers == "" {
		fmt.Fprintln(stderr, "planrun kube conduct: give --workers host:port,...")
		return exitBadPlan
	}
	return Conduct(ctx, strings.Split(*workers, ","), *out, wait, rest, stdout, stderr)
}

func unpackCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("planrun kube unpack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "reports", "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "planrun kube unpack: reads a conductor log on standard input; takes only --out DIR")
		return exitBadPlan
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "planrun kube unpack: %v\n", err)
		return exitBadPlan
	}
	u, err := ReadLog(stdin, stderr, *out)
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube unpack: %v\n", err)
		return exitRunFailure
	}
	if !u.Found {
		fmt.Fprintln(stderr, "planrun kube unpack: the log holds no complete report (the conductor may still be running, or failed before writing one)")
		return exitRunFailure
	}
	printMarkdown(u.Files, stdout, stderr)
	return u.Exit
}

// clients holds only the core and batch API clients: the full clientset
// would add some 40 MB to the binary.
type clients struct {
	core  *coreclient.CoreV1Client
	batch *batchclient.BatchV1Client
}

func (c clients) CoreV1() coreclient.CoreV1Interface    { return c.core }
func (c clients) BatchV1() batchclient.BatchV1Interface { return c.batch }

func newClient(cfg *rest.Config) (Client, error) {
	core, err := coreclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	batch, err := batchclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return clients{core, batch}, nil
}
