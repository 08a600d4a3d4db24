package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install" // batch/v1 into legacyscheme
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1 into legacyscheme
	jobregistry "k8s.io/kubernetes/pkg/registry/batch/job"
	configmapregistry "k8s.io/kubernetes/pkg/registry/core/configmap"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"
	secretregistry "k8s.io/kubernetes/pkg/registry/core/secret"
	serviceregistry "k8s.io/kubernetes/pkg/registry/core/service"

	_ "github.com/planrun/planrun/drivers/kafka" // the plan's driver, as planrun's main package registers it
	"github.com/planrun/planrun/kube"
	_ "github.com/planrun/planrun/steps" // the plan's steps
)

// decoder decodes JSON or YAML of any version the API server serves
// strictly (unknown or duplicate fields are errors), applies the
// versioned defaults and converts to the internal types, as the API server
// does with a request body.
var decoder = serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict).
	UniversalDecoder(core.SchemeGroupVersion, batch.SchemeGroupVersion)

// strategies are the API server's create strategies, by internal type.
func strategy(obj runtime.Object) (rest.RESTCreateStrategy, error) {
	switch obj.(type) {
	case *batch.Job:
		return jobregistry.Strategy, nil
	case *core.Service:
		return serviceregistry.Strategy, nil
	case *core.ConfigMap:
		return configmapregistry.Strategy, nil
	case *core.Secret:
		return secretregistry.Strategy, nil
	case *core.Pod:
		return podregistry.Strategy, nil
	}
	return nil, fmt.Errorf("no strategy for %T", obj)
}

// admit runs one serialised object through the API server's create path
// in namespace ns and returns the internal object it would store.
func admit(ns string, data []byte) (runtime.Object, error) {
	obj, gvk, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	st, err := strategy(obj)
	if err != nil {
		return nil, err
	}
	return obj, create(ns, gvk.Kind, st, obj)
}

func create(ns, kind string, st rest.RESTCreateStrategy, obj runtime.Object) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	rest.FillObjectMetaSystemFields(m) // UID and creation time, as the registry sets them
	if svc, ok := obj.(*core.Service); ok {
		serviceBeginCreate(svc)
	}
	group, version := "", "v1"
	if kind == "Job" {
		group = "batch"
	}
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIGroup: group, APIVersion: version,
		Namespace: ns, Resource: strings.ToLower(kind) + "s", Name: m.GetName(),
	})
	if err := rest.BeforeCreate(st, ctx, obj); err != nil {
		return fmt.Errorf("%s %s: %w", kind, m.GetName(), err)
	}
	return nil
}

// serviceBeginCreate does what the Service storage's BeginCreate hook
// (pkg/registry/core/service/storage: normalizeClusterIPs and
// Allocators.initIPFamilyFields) does to a new Service before the
// strategy validates it, on a single-stack IPv4 cluster: the plural
// clusterIPs from the singular, and the IP family fields. The storage
// itself needs IP and port allocators backed by etcd.
func serviceBeginCreate(svc *core.Service) {
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	if svc.Spec.Type == core.ServiceTypeExternalName {
		return
	}
	if svc.Spec.IPFamilyPolicy == nil {
		policy := core.IPFamilyPolicySingleStack
		if svc.Spec.ClusterIP == core.ClusterIPNone && len(svc.Spec.Selector) == 0 {
			policy = core.IPFamilyPolicyRequireDualStack
		}
		svc.Spec.IPFamilyPolicy = &policy
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []core.IPFamily{core.IPv4Protocol}
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	if o, ok := obj.(metav1.Object); ok {
		return o, nil
	}
	return nil, fmt.Errorf("%T has no object metadata", obj)
}

// pods makes the pods the Job controller would create from a Job that
// passed validation: its template, an Indexed Job's index annotation and
// host name, the controller's labels.
func pods(job *batch.Job) []*core.Pod {
	n := 1
	if job.Spec.Completions != nil {
		n = int(*job.Spec.Completions)
	}
	var out []*core.Pod
	for i := 0; i < n; i++ {
		p := &core.Pod{
			ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(),
			Spec:       *job.Spec.Template.Spec.DeepCopy(),
		}
		p.Namespace = job.Namespace
		p.Name = fmt.Sprintf("%s-%d-x7k2p", job.Name, i) // generateName NAME-INDEX- and 5 characters
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		if job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batch.IndexedCompletion {
			p.Annotations[batchv1.JobCompletionIndexAnnotation] = fmt.Sprint(i)
			p.Labels[batchv1.JobCompletionIndexAnnotation] = fmt.Sprint(i)
			p.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, i)
			for c := range p.Spec.Containers {
				p.Spec.Containers[c].Env = append(p.Spec.Containers[c].Env, core.EnvVar{
					Name: "JOB_COMPLETION_INDEX",
					ValueFrom: &core.EnvVarSource{FieldRef: &core.ObjectFieldSelector{
						APIVersion: "v1", FieldPath: "metadata.labels['" + batchv1.JobCompletionIndexAnnotation + "']",
					}},
				})
			}
		}
		out = append(out, p)
	}
	return out
}

// spec is a run of a plan from plans/ on 3 workers, with every flag of
// `kube run` that changes the objects given.
func spec(t *testing.T) kube.Spec {
	t.Helper()
	path := filepath.Join("..", "..", "plans", "quickstart.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kube.Spec{
		RunID: "ci1", Namespace: "load", Image: "registry.example/planrun:1.0.0", Workers: 3,
		PlanFile: filepath.Base(path), Plan: data, Sets: map[string]string{"rate": "5000", "warm": "5s"},
		PullPolicy: "IfNotPresent", WorkerCPU: "1500m", WorkerMemory: "1Gi",
		ConductorCPU: "500m", ConductorMemory: "512Mi", Spread: "required", Deadline: 7200,
		ServiceAccount: "planrun",
	}
}

// admitAll admits every object and the Jobs' pods; it returns the errors.
func admitAll(ns string, docs [][]byte) []error {
	var errs []error
	for _, d := range docs {
		obj, err := admit(ns, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if job, ok := obj.(*batch.Job); ok {
			for _, p := range pods(job) {
				if err := create(ns, "Pod", podregistry.Strategy, p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errs
}

// TestRunObjectsValidate: what `kube run` creates, serialised as
// client-go sends it (JSON), passes the API server's create path, and so
// do the pods the Job controller makes of the Jobs.
func TestRunObjectsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*kube.Spec)
	}{
		{"all flags", func(*kube.Spec) {}},
		{"defaults", func(s *kube.Spec) {
			s.PullPolicy, s.WorkerCPU, s.WorkerMemory, s.ConductorCPU, s.ConductorMemory = "", "", "", "", ""
			s.Spread, s.Deadline, s.ServiceAccount, s.Sets = "", 0, "", nil
		}},
		{"longest names", func(s *kube.Spec) {
			s.RunID, s.Workers, s.Port, s.PlanFile = strings.Repeat("z9", 10), 1000, 65535, "a plan with spaces & more.yaml"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(t)
			tc.edit(&s)
			m, err := kube.Prepare(s)
			if err != nil {
				t.Fatal(err)
			}
			var docs [][]byte
			for _, o := range m.Objects() {
				j, err := json.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, j)
			}
			for _, err := range admitAll(s.Namespace, docs) {
				t.Error(err)
			}
		})
	}
}

// render runs `planrun kube render` and returns its YAML documents.
func render(t *testing.T, args ...string) [][]byte {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errb bytes.Buffer
	args = append([]string{"render", filepath.Join("..", "..", "plans", "quickstart.yaml"),
		"--workers", "3", "--namespace", "load", "--image", "registry.example/planrun:1.0.0"}, args...)
	if code := kube.Main(args, &out, &errb); code != 0 {
		t.Fatalf("kube render exited %d: %s", code, errb.String())
	}
	var docs [][]byte
	for _, d := range strings.Split(out.String(), "\n---\n") {
		if strings.Contains(d, "\nkind: ") {
			docs = append(docs, []byte(d))
		}
	}
	if len(docs) != 4 {
		t.Fatalf("render printed %d objects, want 4 (ConfigMap, Service, two Jobs):\n%s", len(docs), out.String())
	}
	return docs
}

// TestRenderValidates: the YAML `kube render` prints for a plan from
// plans/ on 3 workers decodes strictly and passes the API server's create
// path, with the default flags and with every flag that changes objects.
func TestRenderValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default flags", nil},
		{"every flag", []string{"--set", "rate=5000", "--cpu", "1500m", "--memory", "1Gi", "--conductor-cpu", "500m",
			"--conductor-memory", "512Mi", "--spread", "required", "--port", "9000", "--pull-policy", "Always",
			"--service-account", "planrun", "--deadline", "2h", "--run-id", "nightly-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range admitAll("load", render(t, tc.args...)) {
				t.Error(err)
			}
		})
	}
}

// TestBrokenManifestsRejected: the same YAML, each broken on purpose in
// one place, is rejected, and the error names what is wrong; so the test
// above can fail.
func TestBrokenManifestsRejected(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"Job restart policy", "restartPolicy: Never", "restartPolicy: Always", "spec.template.spec.restartPolicy"},
		{"negative parallelism", "parallelism: 3", "parallelism: -3", "spec.parallelism"},
		{"misspelt field (strict decoding)", "backoffLimit: 0", "backofLimit: 0", `unknown field "spec.backofLimit"`},
		{"ConfigMap key", "quickstart.yaml: |", "quick start.yaml: |", "data[quick start.yaml]"},
		{"Service cluster IP", "clusterIP: None", "clusterIP: 10.0.0.300", "spec.clusterIPs"},
		{"request above limit", "requests:\n            cpu: \"2\"", "requests:\n            cpu: \"3\"", "must be less than or equal to cpu limit"},
		{"port name", "name: control", "name: Control_Port", "Control_Port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := render(t)
			n := 0
			for i, d := range docs {
				n += bytes.Count(d, []byte(tc.old))
				docs[i] = bytes.ReplaceAll(d, []byte(tc.old), []byte(tc.new))
			}
			if n == 0 {
				t.Fatalf("the rendered YAML has no %q to break", tc.old)
			}
			errs := admitAll("load", docs)
			if len(errs) == 0 {
				t.Fatalf("%q instead of %q was accepted", tc.new, tc.old)
			}
			var all []string
			for _, err := range errs {
				all = append(all, err.Error())
			}
			if msg := strings.Join(all, "\n"); !strings.Contains(msg, tc.want) {
				t.Errorf("rejected, but no error names %q:\n%s", tc.want, msg)
			}
		})
	}
}
