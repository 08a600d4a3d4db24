// Package registry is the one registry type planrun's components use:
// drivers, steps, collectors, workload kinds and reporters each keep a
// Registry of their own and register themselves by name from init.
package registry

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Registry maps names to components of one sort. The zero value is not
// usable; make one with New.
type Registry[T any] struct {
	what  string // "driver", "step"...: names the registry in panics
	mu    sync.RWMutex
	items map[string]T
}

// New returns an empty registry of what ("driver", "step kind"...).
func New[T any](what string) *Registry[T] {
	return &Registry[T]{what: what, items: map[string]T{}}
}

// Register adds a component under name. Registering a name twice is a
// programming error and panics, at init, before any plan is read.
func (r *Registry[T]) Register(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.items[name]; dup {
		panic(fmt.Sprintf("%s %q registered twice", r.what, name))
	}
	r.items[name] = v
}

// Lookup returns the component registered under name.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.items[name]
	return v, ok
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.items))
}

// All returns the components in name order.
func (r *Registry[T]) All() []T {
	names := r.Names()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]T, len(names))
	for i, n := range names {
		out[i] = r.items[n]
	}
	return out
}

// Kind is a kind of plan component that a plan names and that decodes
// into a fresh value of its own: a step kind, a collector kind.
type Kind[T any] struct {
	Name string
	Doc  string
	New  func() T
}

// Kinds is a registry of kinds, each under its own name.
type Kinds[T any] struct{ *Registry[Kind[T]] }

// NewKinds returns an empty registry of kinds (what names them in panics).
func NewKinds[T any](what string) Kinds[T] { return Kinds[T]{New[Kind[T]](what)} }

// Add registers a kind under its name.
func (k Kinds[T]) Add(kind Kind[T]) { k.Register(kind.Name, kind) }
