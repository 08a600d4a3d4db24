package workloads

import (
	"testing"

	"github.com/planrun/planrun/drivers"
)

// Every registered kind says how its section splits over workers, so a new
// kind is split, or kept whole, on purpose.
func TestEveryKindSaysHowItShards(t *testing.T) {
	for _, k := range Kinds() {
		if _, ok := k.New().(Sharder); !ok {
			t.Errorf("workload kind %s: its section (%T) does not implement Sharder", k.Name, k.New())
		}
	}
}

// fleet stands for a driver's options with clients to split.
type fleet struct{ clients, base int }

func (f fleet) Shard(p drivers.Part) any {
	base, n := drivers.Split(f.clients, p.Index, p.Of)
	return fleet{clients: n, base: f.base + base}
}

func (f fleet) ShardUnits() int { return f.clients }

// Threads, rate and count split as evenly as possible, remainders to the
// lowest indices; clients split into contiguous ranges; a consume count
// and a relay count stay with whoever merges the shards.
func TestShardSplits(t *testing.T) {
	p := &ProduceSection{Spec: ProduceSpec{Threads: 7, Rate: FixedRate(900), Count: 10}, Opts: fleet{clients: 5}}
	if got := Shards(p, 8); got != 5 {
		t.Errorf("a producer of 5 clients uses %d of 8 workers, want 5", got)
	}
	if got := Shards(&ProduceSection{Spec: ProduceSpec{Count: 3}}, 8); got != 3 {
		t.Errorf("a producer of count 3 uses %d of 8 workers, want 3", got)
	}
	var threads, count []int
	var rate float64
	next := 0
	for i := range 3 {
		s := Shard(p, i, 3).(*ProduceSection)
		threads = append(threads, s.Spec.Threads)
		count = append(count, int(s.Spec.Count))
		rate += s.Spec.Rate.Fixed
		f := s.Opts.(fleet)
		if f.base != next {
			t.Errorf("shard %d's clients start at %d, want %d", i, f.base, next)
		}
		next += f.clients
	}
	if threads[0] != 3 || threads[1] != 2 || threads[2] != 2 || count[0] != 4 || count[1] != 3 || count[2] != 3 {
		t.Errorf("threads %v, counts %v; want [3 2 2], [4 3 3]", threads, count)
	}
	if rate != 900 || next != 5 {
		t.Errorf("rates add up to %v, clients to %d; want 900, 5", rate, next)
	}
	if p.Spec.Threads != 7 || p.Opts.(fleet).clients != 5 {
		t.Errorf("sharding changed the section: %+v", p)
	}

	c := &ConsumeSection{Spec: ConsumeSpec{Consumers: 5, Count: 100}}
	if got := Shards(c, 8); got != 5 {
		t.Errorf("5 consumers use %d of 8 workers, want 5", got)
	}
	s := Shard(c, 1, 2).(*ConsumeSection)
	if s.Spec.Consumers != 2 || s.Spec.InstanceBase != 3 || s.Spec.Count != 0 {
		t.Errorf("consume shard 1 of 2: %+v", s.Spec)
	}
	r := &RelaySection{Spec: RelaySpec{Count: 10, Threads: 4}}
	if got := Shards(r, 4); got != 1 {
		t.Errorf("a relay uses %d workers, want 1", got)
	}
	if s := Shard(r, 0, 1).(*RelaySection); s.Spec.Count != 0 || s.Spec.Threads != 4 || r.Spec.Count != 10 {
		t.Errorf("relay shard %+v (from %+v)", s.Spec, r.Spec)
	}
	if got := Shards(&ConnectSection{}, 4); got != 1 {
		t.Errorf("connections a driver cannot split use %d workers, want 1", got)
	}
	if got := Shards(&ConnectSection{Opts: fleet{clients: 3}}, 4); got != 3 {
		t.Errorf("3 clients use %d workers, want 3", got)
	}
}
