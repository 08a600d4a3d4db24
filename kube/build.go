// Package kube runs a plan on Kubernetes: planrun workers as an Indexed Job
// behind a headless Service, and the conductor as a Job of its own that
// reaches them by their DNS names. `kube run` creates, waits, streams and
// deletes; `kube render` prints the same objects as YAML. Both use Build.
package kube

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/planrun/planrun/cluster/certs"
)

// Labels every object carries; cleanup and `kubectl delete -l` use RunLabel.
const (
	RunLabel       = "planrun.io/run"
	ComponentLabel = "app.kubernetes.io/component"
	NameLabel      = "app.kubernetes.io/name"
	// TokenKey is the key of the shared token in the Secret.
	TokenKey = "token"
	// PlanDir is where the conductor sees the plan.
	PlanDir = "/plan"
	// ReportDir is where the conductor writes its reports inside its pod.
	ReportDir = "/reports"
	// TLSDir is where a pod sees its certificates and key from the Secret.
	TLSDir = "/tls"
)

// Spec is what the manifests are built from.
type Spec struct {
	RunID     string // lower-case letters and digits; names and labels derive from it
	Namespace string
	Image     string
	// PullPolicy is the containers' imagePullPolicy; empty lets Kubernetes choose.
	PullPolicy corev1.PullPolicy
	Workers    int
	Port       int32  // the workers' control port
	PlanFile   string // the plan's file name; the ConfigMap key
	Plan       []byte // the plan as written
	Sets       map[string]string
	// WorkerCPU and WorkerMemory are each worker's request and limit.
	WorkerCPU, WorkerMemory string
	// ConductorCPU and ConductorMemory are the conductor's request and limit.
	ConductorCPU, ConductorMemory string
	// Spread is "preferred" (default) or "required": whether two workers
	// may share a node when there are fewer nodes than workers.
	Spread string
	// Deadline, when above zero, ends the Jobs after that many seconds
	// whatever happens (activeDeadlineSeconds).
	Deadline int64
	// ServiceAccount runs the pods under a named service account.
	ServiceAccount string
	// Insecure runs the control channel in plain TCP (workers started with
	// --insecure); by default it is TLS with certificates from the Secret.
	Insecure bool
}

// Manifests are the objects of one run, in the order they are created.
type Manifests struct {
	Secret    *corev1.Secret // holds no data until Run puts the token and certificates in
	ConfigMap *corev1.ConfigMap
	Service   *corev1.Service
	Workers   *batchv1.Job
	Conductor *batchv1.Job
}

// Objects lists the manifests in creation order.
func (m *Manifests) Objects() []runtime.Object {
	return []runtime.Object{m.Secret, m.ConfigMap, m.Service, m.Workers, m.Conductor}
}

var runIDRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?$`)

// Name is the common prefix of the run's object names.
func (s *Spec) Name() string { return "planrun-" + s.RunID }

// WorkerAddrs are the workers' control addresses as the conductor dials
// them: the pod host names an Indexed Job gives (JOB-INDEX) under the
// headless Service.
func (s *Spec) WorkerAddrs() []string {
	addrs := make([]string, s.Workers)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("%s-worker-%d.%s.%s.svc:%d", s.Name(), i, s.Name(), s.Namespace, s.Port)
	}
	return addrs
}

func (s *Spec) check() error {
	var errs []string
	if !runIDRe.MatchString(s.RunID) {
		errs = append(errs, fmt.Sprintf("run id %q: use 1 to 20 lower-case letters, digits and dashes", s.RunID))
	}
	if s.Namespace == "" {
		errs = append(errs, "no namespace")
	}
	if s.Image == "" {
		errs = append(errs, "no image: give --image (the planrun image you built and pushed, see the README) or set PLANRUN_IMAGE")
	}
	if s.Workers < 1 || s.Workers > 1000 {
		errs = append(errs, fmt.Sprintf("--workers %d: give 1 to 1000", s.Workers))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, fmt.Sprintf("port %d out of range", s.Port))
	}
	if len(s.Plan) > 900_000 {
		errs = append(errs, fmt.Sprintf("plan is %d bytes; a ConfigMap holds under 1 MiB", len(s.Plan)))
	}
	switch s.Spread {
	case "", "preferred", "required":
	default:
		errs = append(errs, fmt.Sprintf("--spread %q: give preferred or required", s.Spread))
	}
	for _, q := range []struct{ flag, v string }{
		{"--cpu", s.WorkerCPU}, {"--memory", s.WorkerMemory},
		{"--conductor-cpu", s.ConductorCPU}, {"--conductor-memory", s.ConductorMemory},
	} {
		if q.v == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q.v); err != nil {
			errs = append(errs, fmt.Sprintf("%s %q: give a Kubernetes quantity such as 2, 500m, 1Gi", q.flag, q.v))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

var keyUnsafe = regexp.MustCompile(`[^-._a-zA-Z0-9]`)

// planKey is the plan's file name as a ConfigMap key.
func (s *Spec) planKey() string {
	k := keyUnsafe.ReplaceAllString(filepath.Base(s.PlanFile), "_")
	if k == "" || k == "." || k == ".." {
		k = "plan.yaml"
	}
	return k
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func resources(cpu, mem string) corev1.ResourceRequirements {
	l := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
	}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// Build makes the run's objects. The Secret it returns has no data: Run
// puts a fresh token in before creating it, and Render leaves it out.
func Build(s Spec) (*Manifests, error) {
	if s.Port == 0 {
		s.Port = 7070
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	name := s.Name()
	labels := func(component string) map[string]string {
		return map[string]string{NameLabel: "planrun", RunLabel: s.RunID, ComponentLabel: component}
	}
	meta := func(n, component string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: s.Namespace, Labels: labels(component)}
	}
	secretName := name + "-token"
	tokenEnv := corev1.EnvVar{Name: "PLANRUN_TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: TokenKey},
	}}
	no, yes := false, true
	uid := int64(65532)
	sec := &corev1.SecurityContext{
		RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
		AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	tmp := corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	tmpMount := corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"}
	var deadline *int64
	if s.Deadline > 0 {
		deadline = &s.Deadline
	}
	zero := int32(0)
	grace := int64(10)
	n := int32(s.Workers)
	indexed := batchv1.IndexedCompletion

	// Each pod sees only its own certificate and key, and the CA's
	// certificate, from the Secret; readable by the pods' group alone.
	mode := int32(0o440)
	tlsVolume := func(cert, key string) corev1.Volume {
		return corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secretName, DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: certs.CAFile, Path: certs.CAFile}, {Key: cert, Path: cert}, {Key: key, Path: key}},
		}}}
	}
	tlsMount := corev1.VolumeMount{Name: "tls", MountPath: TLSDir, ReadOnly: true}
	tlsArgs := func(cert, key string) []string {
		return []string{"--tls-cert", TLSDir + "/" + cert, "--tls-key", TLSDir + "/" + key, "--tls-ca", TLSDir + "/" + certs.CAFile}
	}
	workerArgs := []string{"worker", "--listen", fmt.Sprintf(":%d", s.Port)}
	workerMounts, workerVolumes := []corev1.VolumeMount{tmpMount}, []corev1.Volume{tmp}
	var conductorTLS []string
	if s.Insecure {
		workerArgs = append(workerArgs, "--insecure")
	} else {
		workerArgs = append(workerArgs, tlsArgs(certs.WorkerCertFile, certs.WorkerKeyFile)...)
		workerMounts = append(workerMounts, tlsMount)
		workerVolumes = append(workerVolumes, tlsVolume(certs.WorkerCertFile, certs.WorkerKeyFile))
		conductorTLS = tlsArgs(certs.ConductorCertFile, certs.ConductorKeyFile)
	}
	podSec := &corev1.PodSecurityContext{FSGroup: &uid}

	m := &Manifests{}
	m.Secret = &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(secretName, "token"),
		Type:       corev1.SecretTypeOpaque,
	}
	m.ConfigMap = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(name+"-plan", "plan"),
		Data:       map[string]string{s.planKey(): string(s.Plan)},
	}
	m.Service = &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(name, "worker"),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels("worker"),
			Ports: []corev1.ServicePort{{
				Name: "control", Port: s.Port, TargetPort: intstr.FromString("control"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}

	spreadTerm := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels("worker")},
		TopologyKey:   "kubernetes.io/hostname",
	}
	anti := &corev1.PodAntiAffinity{}
	if s.Spread == "required" {
		anti.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{spreadTerm}
	} else {
		anti.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: spreadTerm}}
	}
	m.Workers = &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(name+"-worker", "worker"),
		Spec: batchv1.JobSpec{
			CompletionMode:        &indexed,
			Completions:           &n,
			Parallelism:           &n,
			BackoffLimit:          &zero, // a lost worker fails the run; it is not replaced mid-run
			ActiveDeadlineSeconds: deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("worker")},
				Spec: corev1.PodSpec{
					// With the Service's name as subdomain, worker i is
					// NAME-worker-i.NAME.NAMESPACE.svc in the cluster DNS.
					Subdomain:                     name,
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					ServiceAccountName:            s.ServiceAccount,
					Affinity:                      &corev1.Affinity{PodAntiAffinity: anti},
					Containers: []corev1.Container{{
						Name:            "worker",
						Image:           s.Image,
						ImagePullPolicy: s.PullPolicy,
						// The Job controller sets JOB_COMPLETION_INDEX (0..N-1)
						// in every container; the conductor assigns the shards.
						Args:  workerArgs,
						Env:   []corev1.EnvVar{tokenEnv},
						Ports: []corev1.ContainerPort{{Name: "control", ContainerPort: s.Port, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("control")}},
							PeriodSeconds: 2, FailureThreshold: 1,
						},
						Resources:       resources(orDefault(s.WorkerCPU, "2"), orDefault(s.WorkerMemory, "2Gi")),
						SecurityContext: sec,
						VolumeMounts:    workerMounts,
					}},
					Volumes:         workerVolumes,
					SecurityContext: podSec,
				},
			},
		},
	}

	args := append([]string{"kube", "conduct", "--workers", strings.Join(s.WorkerAddrs(), ","), "--out", ReportDir}, conductorTLS...)
	keys := make([]string, 0, len(s.Sets))
	for k := range s.Sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--set", k+"="+s.Sets[k])
	}
	args = append(args, PlanDir+"/"+s.planKey())
	one := int32(1)
	m.Conductor = &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(name+"-conductor", "conductor"),
		Spec: batchv1.JobSpec{
			Completions:           &one,
			Parallelism:           &one,
			BackoffLimit:          &zero, // a plan runs once; a failed run is reported, not retried
			ActiveDeadlineSeconds: deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("conductor")},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					ServiceAccountName:            s.ServiceAccount,
					Containers: []corev1.Container{{
						Name:            "conductor",
						Image:           s.Image,
						ImagePullPolicy: s.PullPolicy,
						Args:            args,
						Env:             []corev1.EnvVar{tokenEnv},
						Resources:       resources(orDefault(s.ConductorCPU, "1"), orDefault(s.ConductorMemory, "1Gi")),
						SecurityContext: sec,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "plan", MountPath: PlanDir, ReadOnly: true},
							{Name: "reports", MountPath: ReportDir},
							tmpMount,
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "plan", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: m.ConfigMap.Name},
						}}},
						{Name: "reports", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						tmp,
					},
				},
			},
		},
	}
	if !s.Insecure {
		ps := &m.Conductor.Spec.Template.Spec
		ps.Containers[0].VolumeMounts = append(ps.Containers[0].VolumeMounts, tlsMount)
		ps.Volumes = append(ps.Volumes, tlsVolume(certs.ConductorCertFile, certs.ConductorKeyFile))
		ps.SecurityContext = podSec
	}
	return m, nil
}
