package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/planrun/planrun/cluster/certs"
)

// Client is what Run needs of the API: the core and batch groups only.
type Client interface {
	CoreV1() coreclient.CoreV1Interface
	BatchV1() batchclient.BatchV1Interface
}

// Runner creates a run's objects, waits for the workers, follows the
// conductor and deletes everything it created.
type Runner struct {
	// Client is the part of a clientset Run uses (a kubernetes.Clientset,
	// or its fake in tests).
	Client Client
	Log    io.Writer // progress and the conductor's log
	// Poll is how often pod states are read (default 1s).
	Poll time.Duration
	// ReadyTimeout bounds the wait for the workers and the conductor's
	// pod to start (default 5m: image pulls and node scale-ups take time).
	ReadyTimeout time.Duration
	// CleanupTimeout bounds the deletions at the end (default 30s).
	CleanupTimeout time.Duration
	// Logs opens a pod's log; nil follows it through the API server.
	Logs func(ctx context.Context, namespace, pod string, follow bool) (io.ReadCloser, error)
}

// Prepare builds the objects Run creates: Build's, with a fresh random
// token in the Secret and, unless s.Insecure, fresh certificates: the
// CA's certificate, the workers' certificate and key and the conductor's
// (certs.Generate). The CA's key signs them and is forgotten; it is in no
// object.
func Prepare(s Spec) (*Manifests, error) {
	m, err := Build(s)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	m.Secret.Data = map[string][]byte{TokenKey: []byte(hex.EncodeToString(b))}
	if !s.Insecure {
		set, err := certs.Generate(certs.Options{})
		if err != nil {
			return nil, fmt.Errorf("making the control channel's certificates: %w", err)
		}
		maps.Copy(m.Secret.Data, set.Files())
	}
	return m, nil
}

// Run runs the plan in s on the cluster and brings the report to outDir.
// It returns what came back (files and the conductor's exit code), or an error when the run could not
// be carried out (then nothing of the report may have come back).
// Whatever it created is deleted before it returns, also when ctx ends.
func (r *Runner) Run(ctx context.Context, s Spec, outDir string) (Unpacked, error) {
	m, err := Prepare(s)
	if err != nil {
		return Unpacked{}, err
	}
	var created []runtime.Object
	defer func() { r.cleanup(s, created) }()

	for _, o := range []runtime.Object{m.Secret, m.ConfigMap, m.Service, m.Workers} {
		if err := r.create(ctx, o); err != nil {
			return Unpacked{}, err
		}
		created = append(created, o)
	}
	fmt.Fprintf(r.Log, "kube: run %s: waiting for %d workers in namespace %s\n", s.RunID, s.Workers, s.Namespace)
	if _, err := r.waitPods(ctx, s, "worker", s.Workers, m.Workers.Name); err != nil {
		return Unpacked{}, err
	}
	fmt.Fprintf(r.Log, "kube: %d workers ready; starting the conductor\n", s.Workers)
	if err := r.create(ctx, m.Conductor); err != nil {
		return Unpacked{}, err
	}
	created = append(created, m.Conductor)
	pods, err := r.waitPods(ctx, s, "conductor", 1, m.Conductor.Name)
	if err != nil {
		return Unpacked{}, err
	}
	pod := pods[0]
	rc, err := r.openLog(ctx, s.Namespace, pod, true)
	if err != nil {
		return Unpacked{}, fmt.Errorf("conductor log: %w", err)
	}
	u, err := ReadLog(rc, r.Log, outDir)
	rc.Close()
	if err != nil {
		return Unpacked{}, err
	}
	if ctx.Err() != nil {
		return Unpacked{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if u.Found {
		return u, nil
	}
	// The log stream can end before the pod does (a dropped connection):
	// wait for the end and read the whole log once more, quietly.
	code, reason, err := r.waitTerminated(ctx, s.Namespace, pod)
	if err != nil {
		return Unpacked{}, err
	}
	if rc, err := r.openLog(ctx, s.Namespace, pod, false); err == nil {
		u, err = ReadLog(rc, io.Discard, outDir)
		rc.Close()
		if err == nil && u.Found {
			return u, nil
		}
	}
	return Unpacked{}, fmt.Errorf("the conductor ended (exit code %d, %s) without handing back its report", code, reason)
}

func (r *Runner) openLog(ctx context.Context, ns, pod string, follow bool) (io.ReadCloser, error) {
	if r.Logs != nil {
		return r.Logs(ctx, ns, pod, follow)
	}
	return r.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "conductor", Follow: follow}).Stream(ctx)
}

func (r *Runner) create(ctx context.Context, o runtime.Object) error {
	var err error
	var name string
	switch o := o.(type) {
	case *corev1.Secret:
		name = "Secret " + o.Name
		_, err = r.Client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		name = "ConfigMap " + o.Name
		_, err = r.Client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		name = "Service " + o.Name
		_, err = r.Client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *batchv1.Job:
		name = "Job " + o.Name
		_, err = r.Client.BatchV1().Jobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("cannot create %T", o)
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	return nil
}

// cleanup deletes what was created, newest first, with a context of its
// own so that it runs after an interrupt too.
func (r *Runner) cleanup(s Spec, created []runtime.Object) {
	if len(created) == 0 {
		return
	}
	timeout := r.CleanupTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg} // the Jobs' pods go with them
	var failed []string
	for i := len(created) - 1; i >= 0; i-- {
		var err error
		var name string
		switch o := created[i].(type) {
		case *corev1.Secret:
			name, err = "Secret "+o.Name, r.Client.CoreV1().Secrets(o.Namespace).Delete(ctx, o.Name, opts)
		case *corev1.ConfigMap:
			name, err = "ConfigMap "+o.Name, r.Client.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, o.Name, opts)
		case *corev1.Service:
			name, err = "Service "+o.Name, r.Client.CoreV1().Services(o.Namespace).Delete(ctx, o.Name, opts)
		case *batchv1.Job:
			name, err = "Job "+o.Name, r.Client.BatchV1().Jobs(o.Namespace).Delete(ctx, o.Name, opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(r.Log, "kube: could not delete %s\nkube: delete them with: kubectl -n %s delete job,service,configmap,secret -l %s=%s\n",
			strings.Join(failed, "; "), s.Namespace, RunLabel, s.RunID)
		return
	}
	fmt.Fprintf(r.Log, "kube: deleted the %d objects of run %s\n", len(created), s.RunID)
}

// podTrouble is what makes a pod that has not started a lost cause.
var podTrouble = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true,
}

// waitPods waits until want pods of the component are ready (workers) or
// running or ended (the conductor), and fails early on what will not heal.
func (r *Runner) waitPods(ctx context.Context, s Spec, component string, want int, job string) ([]string, error) {
	timeout := r.ReadyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	poll := r.Poll
	if poll <= 0 {
		poll = time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	sel := fmt.Sprintf("%s=%s,%s=%s", RunLabel, s.RunID, ComponentLabel, component)
	lastReady, lastNote := -1, ""
	for {
		list, err := r.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			return nil, fmt.Errorf("listing %s pods: %w", component, err)
		}
		var ready []string
		note := ""
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := podFailed(&p); err != nil {
				return nil, err
			}
			if n := unscheduled(&p); n != "" {
				note = n
			}
			if podReady(&p, component == "conductor") {
				ready = append(ready, p.Name)
			}
		}
		if j, err := r.Client.BatchV1().Jobs(s.Namespace).Get(ctx, job, metav1.GetOptions{}); err == nil {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					return nil, fmt.Errorf("the Job %s failed: %s %s", job, c.Reason, c.Message)
				}
			}
		}
		if len(ready) >= want {
			return ready, nil
		}
		if component == "worker" && len(ready) != lastReady {
			fmt.Fprintf(r.Log, "kube: workers ready: %d/%d\n", len(ready), want)
			lastReady = len(ready)
		}
		if note != "" && note != lastNote {
			fmt.Fprintf(r.Log, "kube: %s\n", note)
			lastNote = note
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted while waiting for the %s pods: %w", component, ctx.Err())
		case <-deadline.C:
			return nil, fmt.Errorf("%d of %d %s pods ready after %s (see kubectl -n %s describe pods -l %s)", len(ready), want, component, timeout, s.Namespace, sel)
		case <-tick.C:
		}
	}
}

func podReady(p *corev1.Pod, startedIsEnough bool) bool {
	if startedIsEnough {
		return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podFailed(p *corev1.Pod) error {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && podTrouble[w.Reason] {
			return fmt.Errorf("pod %s: %s: %s", p.Name, w.Reason, w.Message)
		}
	}
	if p.Status.Phase == corev1.PodFailed && p.Labels[ComponentLabel] == "worker" {
		return fmt.Errorf("worker pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)
	}
	return nil
}

func unscheduled(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("pod %s not scheduled yet: %s", p.Name, c.Message)
		}
	}
	return ""
}

// waitTerminated waits for the conductor container to end.
func (r *Runner) waitTerminated(ctx context.Context, ns, pod string) (int32, string, error) {
	poll := r.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		p, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return 0, "", fmt.Errorf("conductor pod %s: %w", pod, err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				return t.ExitCode, t.Reason, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, "", errors.New("interrupted while waiting for the conductor to end")
		case <-tick.C:
		}
	}
}
