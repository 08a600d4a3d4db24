// Package registry is the one registry type planrun's components use:
// drivers, steps, collectors, workload kinds and reporters each keep a
// Registry of their own and register themselves by name from init.
package registry

import (
	"fmt"
	"sort"
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
	names := make([]string, 0, len(r.items))
	for n := range r.items {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
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
