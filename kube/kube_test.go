package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

func testSpec() Spec {
	return Spec{
		RunID: "t1", Namespace: "load", Image: "registry.example/planrun:1.2.3", Workers: 3,
		PlanFile: "cold read.yaml", Plan: []byte("name: cold\n"),
		Sets: map[string]string{"rate": "5000", "clients": "300"},
	}
}

func TestBuildShape(t *testing.T) {
	m, err := Build(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ConfigMap.Data["cold_read.yaml"]; got != "name: cold\n" {
		t.Errorf("plan in ConfigMap = %q", got)
	}
	if m.Service.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service is not headless")
	}
	w := m.Workers.Spec
	if *w.CompletionMode != batchv1.IndexedCompletion || *w.Completions != 3 || *w.Parallelism != 3 {
		t.Errorf("workers job: mode %v completions %d parallelism %d", *w.CompletionMode, *w.Completions, *w.Parallelism)
	}
	if w.Template.Spec.Subdomain != m.Service.Name {
		t.Errorf("worker subdomain %q, service %q", w.Template.Spec.Subdomain, m.Service.Name)
	}
	if w.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("no preferred anti-affinity")
	}
	args := strings.Join(m.Conductor.Spec.Template.Spec.Containers[0].Args, " ")
	want := "kube conduct --workers planrun-t1-worker-0.planrun-t1.load.svc:7070,planrun-t1-worker-1.planrun-t1.load.svc:7070,planrun-t1-worker-2.planrun-t1.load.svc:7070 --out /reports --tls-cert /tls/conductor.crt --tls-key /tls/conductor.key --tls-ca /tls/ca.crt --set clients=300 --set rate=5000 /plan/cold_read.yaml"
	if args != want {
		t.Errorf("conductor args\n got %s\nwant %s", args, want)
	}
	for _, o := range m.Objects() {
		meta := o.(metav1.Object)
		if meta.GetLabels()[RunLabel] != "t1" {
			t.Errorf("%s has no run label", meta.GetName())
		}
	}
	if m.Secret.Data != nil || m.Secret.StringData != nil {
		t.Errorf("Build put data in the Secret")
	}

	s := testSpec()
	s.Spread = "required"
	m, _ = Build(s)
	if m.Workers.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("--spread required gave no required anti-affinity")
	}
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"no image", func(s *Spec) { s.Image = "" }, "no image"},
		{"zero workers", func(s *Spec) { s.Workers = 0 }, "--workers 0"},
		{"bad run id", func(s *Spec) { s.RunID = "Bad_ID" }, "run id"},
		{"bad cpu", func(s *Spec) { s.WorkerCPU = "two" }, "--cpu"},
		{"bad spread", func(s *Spec) { s.Spread = "always" }, "--spread"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec()
			tc.edit(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// splitDocs splits a multi-document YAML stream.
func splitDocs(y string) []string {
	var docs []string
	for _, d := range strings.Split(y, "\n---\n") {
		if strings.Contains(d, "kind:") {
			docs = append(docs, d)
		}
	}
	return docs
}

// TestRenderDecodesStrictly: every rendered document decodes strictly
// into its k8s.io/api type and equals what Build made.
func TestRenderDecodesStrictly(t *testing.T) {
	s := testSpec()
	m, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, s, m); err != nil {
		t.Fatal(err)
	}
	docs := splitDocs(b.String())
	want := []runtime.Object{m.ConfigMap, m.Service, m.Workers, m.Conductor}
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want %d:\n%s", len(docs), len(want), b.String())
	}
	for i, d := range docs {
		got := reflect.New(reflect.TypeOf(want[i]).Elem()).Interface()
		if err := yaml.UnmarshalStrict([]byte(d), got); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("document %d decodes to something else than was built:\n%s", i, d)
		}
	}
	if strings.Contains(b.String(), "kind: Secret") {
		t.Errorf("render printed the Secret")
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"cold.md": "# report\n", "cold.json": `{"a":1}`, "charts/x.svg": strings.Repeat("<svg/>", 5000)}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	log.WriteString("progress 1\nprogress 2\n")
	if err := WriteArchive(&log, src, 1); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var pass bytes.Buffer
	u, err := ReadLog(bytes.NewReader(log.Bytes()), &pass, out)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Found || u.Exit != 1 || len(u.Files) != 3 {
		t.Fatalf("unpacked %+v", u)
	}
	if pass.String() != "progress 1\nprogress 2\n\n" {
		t.Errorf("passed through %q", pass.String())
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || string(got) != body {
			t.Errorf("%s: %v, %d bytes, want %d", name, err, len(got), len(body))
		}
	}

	// One changed character in the block is caught by the checksum.
	lines := strings.Split(log.String(), "\n")
	for i, l := range lines {
		if i > 0 && strings.HasPrefix(lines[i-1], beginMarker) {
			c := "A"
			if l[0] == 'A' {
				c = "B"
			}
			lines[i] = c + l[1:]
		}
	}
	if _, err := ReadLog(strings.NewReader(strings.Join(lines, "\n")), io.Discard, t.TempDir()); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("damaged block: err = %v", err)
	}
	// A log cut before the end marker holds no report, and says so.
	cut := log.String()[:strings.Index(log.String(), endMarker)]
	u, err = ReadLog(strings.NewReader(cut), io.Discard, t.TempDir())
	if err != nil || u.Found {
		t.Errorf("cut log: %+v, %v", u, err)
	}
}

// cluster plays the parts of a cluster a fake clientset lacks, the Job
// controller and the kubelets, by writing pod objects and their status
// when Jobs appear. No container runs: the tests check what `kube run`
// asks of the API and how it reacts to the states it reads back.
type cluster struct {
	t      *testing.T
	client *fake.Clientset
	ns     string
	// workerStatus gives worker i's status.
	workerStatus func(i int) corev1.PodStatus
	// conductorStarted is closed when the conductor's pod exists.
	conductorStarted chan struct{}
}

func readyStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
}

func (c *cluster) play(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return
		case ev = <-w.ResultChan():
		}
		job, ok := ev.Object.(*batchv1.Job)
		if !ok || ev.Type != watch.Added {
			continue
		}
		n := int(*job.Spec.Completions)
		for i := 0; i < n; i++ {
			status := corev1.PodStatus{Phase: corev1.PodRunning}
			if job.Labels[ComponentLabel] == "worker" {
				status = c.workerStatus(i)
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", job.Name, i), Namespace: c.ns, Labels: job.Spec.Template.Labels},
				Spec:       job.Spec.Template.Spec,
				Status:     status,
			}
			if _, err := c.client.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				c.t.Errorf("creating pod: %v", err)
			}
		}
		if job.Labels[ComponentLabel] == "conductor" {
			close(c.conductorStarted)
		}
	}
}

func newCluster(t *testing.T, ctx context.Context, objs ...runtime.Object) *cluster {
	c := &cluster{t: t, client: fake.NewClientset(objs...), ns: "load", workerStatus: func(int) corev1.PodStatus { return readyStatus() }, conductorStarted: make(chan struct{})}
	w, err := c.client.BatchV1().Jobs(c.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go c.play(ctx, w)
	return c
}

// leftovers lists the run's objects still in the fake API.
func (c *cluster) leftovers(t *testing.T) []string {
	ctx := context.Background()
	var left []string
	sec, _ := c.client.CoreV1().Secrets(c.ns).List(ctx, metav1.ListOptions{})
	for _, o := range sec.Items {
		left = append(left, "Secret "+o.Name)
	}
	cms, _ := c.client.CoreV1().ConfigMaps(c.ns).List(ctx, metav1.ListOptions{})
	for _, o := range cms.Items {
		left = append(left, "ConfigMap "+o.Name)
	}
	svcs, _ := c.client.CoreV1().Services(c.ns).List(ctx, metav1.ListOptions{})
	for _, o := range svcs.Items {
		left = append(left, "Service "+o.Name)
	}
	jobs, _ := c.client.BatchV1().Jobs(c.ns).List(ctx, metav1.ListOptions{})
	for _, o := range jobs.Items {
		left = append(left, "Job "+o.Name)
	}
	return left
}

func created(c *cluster) []string {
	var names []string
	for _, a := range c.client.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource != "pods" {
			names = append(names, a.GetResource().Resource+"/"+ca.GetObject().(metav1.Object).GetName())
		}
	}
	return names
}

func TestRunSuccess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, ctx)

	// The log a conductor writes: its progress lines, then the report block.
	report := t.TempDir()
	if err := os.WriteFile(filepath.Join(report, "cold.md"), []byte("# cold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var conductorLog bytes.Buffer
	conductorLog.WriteString("conductor: all 3 workers reachable\n")
	if err := WriteArchive(&conductorLog, report, 0); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	out := t.TempDir()
	r := &Runner{Client: c.client, Log: &logged, Poll: 5 * time.Millisecond,
		Logs: func(ctx context.Context, ns, pod string, follow bool) (io.ReadCloser, error) {
			if !strings.HasPrefix(pod, "planrun-t1-conductor-") || !follow {
				return nil, fmt.Errorf("log of %s (follow %v) asked", pod, follow)
			}
			return io.NopCloser(bytes.NewReader(conductorLog.Bytes())), nil
		}}
	s := testSpec()
	s.Namespace = c.ns
	u, err := r.Run(ctx, s, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, logged.String())
	}
	if !u.Found || u.Exit != 0 || len(u.Files) != 1 {
		t.Errorf("unpacked %+v", u)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "cold.md")); string(got) != "# cold\n" {
		t.Errorf("report = %q", got)
	}
	want := []string{"secrets/planrun-t1-token", "configmaps/planrun-t1-plan", "services/planrun-t1", "jobs/planrun-t1-worker", "jobs/planrun-t1-conductor"}
	if got := created(c); !reflect.DeepEqual(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
	// The Secret went in with a token that no line printed.
	for _, a := range c.client.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok {
			if sec, ok := ca.GetObject().(*corev1.Secret); ok {
				tok := string(sec.Data[TokenKey])
				if len(tok) != 64 {
					t.Errorf("token of %d characters", len(tok))
				}
				if strings.Contains(logged.String(), tok) {
					t.Errorf("token printed")
				}
			}
		}
	}
	if !strings.Contains(logged.String(), "conductor: all 3 workers reachable") {
		t.Errorf("conductor log not passed on:\n%s", logged.String())
	}
	if left := c.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestRunWorkerCannotStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, ctx)
	c.workerStatus = func(i int) corev1.PodStatus {
		if i == 1 {
			return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull access denied"}},
			}}}
		}
		return readyStatus()
	}
	var logged bytes.Buffer
	r := &Runner{Client: c.client, Log: &logged, Poll: 5 * time.Millisecond}
	s := testSpec()
	s.Namespace = c.ns
	_, err := r.Run(ctx, s, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "planrun-t1-worker-1: ImagePullBackOff: pull access denied") {
		t.Fatalf("err = %v", err)
	}
	if got := created(c); len(got) != 4 {
		t.Errorf("created %v; the conductor must not start", got)
	}
	if left := c.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestRunCreateFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newCluster(t, ctx)
	c.client.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`services is forbidden: User "u" cannot create resource "services"`)
	})
	var logged bytes.Buffer
	r := &Runner{Client: c.client, Log: &logged, Poll: 5 * time.Millisecond}
	s := testSpec()
	s.Namespace = c.ns
	_, err := r.Run(ctx, s, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "creating Service planrun-t1: services is forbidden") {
		t.Fatalf("err = %v", err)
	}
	if left := c.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if !strings.Contains(logged.String(), "deleted the 2 objects of run t1") {
		t.Errorf("log:\n%s", logged.String())
	}
}

// TestRunInterrupted: Ctrl-C while the workers start, and while the
// conductor runs; both times everything goes.
func TestRunInterrupted(t *testing.T) {
	t.Run("waiting for workers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := newCluster(t, ctx)
		runCtx, interrupt := context.WithCancel(ctx)
		c.workerStatus = func(i int) corev1.PodStatus {
			if i == 2 {
				interrupt() // the user gives up while the last worker is pending
				return corev1.PodStatus{Phase: corev1.PodPending}
			}
			return readyStatus()
		}
		var logged bytes.Buffer
		r := &Runner{Client: c.client, Log: &logged, Poll: 5 * time.Millisecond}
		s := testSpec()
		s.Namespace = c.ns
		_, err := r.Run(runCtx, s, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Fatalf("err = %v", err)
		}
		if left := c.leftovers(t); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	t.Run("while the conductor runs", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := newCluster(t, ctx)
		runCtx, interrupt := context.WithCancel(ctx)
		var logged bytes.Buffer
		r := &Runner{Client: c.client, Log: &logged, Poll: 5 * time.Millisecond,
			Logs: func(ctx context.Context, ns, pod string, follow bool) (io.ReadCloser, error) {
				// A log that never ends until the stream's context does.
				pr, pw := io.Pipe()
				go func() {
					fmt.Fprintln(pw, "conductor: all 3 workers reachable")
					<-ctx.Done()
					pw.CloseWithError(ctx.Err())
				}()
				go func() { <-c.conductorStarted; interrupt() }()
				return pr, nil
			}}
		s := testSpec()
		s.Namespace = c.ns
		_, err := r.Run(runCtx, s, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Fatalf("err = %v", err)
		}
		if got := created(c); len(got) != 5 {
			t.Errorf("created %v", got)
		}
		if left := c.leftovers(t); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
}
