package rocketmq

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// BenchmarkClientSyncSend measures the real client's SendSync of 1 KiB
// messages from 16 goroutines.
func BenchmarkClientSyncSend(b *testing.B) {
	br := startBroker(b, Options{})
	p := newProducer(b, br, producer.WithCompressMsgBodyOverHowmuch(1<<20))
	body := bytes.Repeat([]byte("x"), 1024)
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("bench", body)); err != nil {
		b.Fatal(err)
	}
	const workers = 16
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := p.SendSync(context.Background(), primitive.NewMessage("bench", body)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkClientPushConsume measures how fast the real push consumer drains
// a backlog of 1 KiB messages.
func BenchmarkClientPushConsume(b *testing.B) {
	br := startBroker(b, Options{})
	fillBacklog(b, br, "drain", b.N)
	col := newCollector()
	var got atomic.Int64
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	c := startConsumer(b, br, consumerConfig{
		group: "drainers", instance: uniqueName("drain"), topic: "drain",
		handle: func(context.Context, *primitive.MessageExt) consumer.ConsumeResult {
			if got.Add(1) == int64(b.N) {
				close(done)
			}
			return consumer.ConsumeSuccess
		},
		opts: []consumer.Option{consumer.WithPullBatchSize(64), consumer.WithConsumeMessageBatchMaxSize(32)},
	}, col)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("backlog not drained")
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	waitIdle(b, br, "drainers", 8+1, col)
	stopConsumer(b, c)
}

// BenchmarkRawPull measures broker-side pull throughput without the client:
// one connection pulling 256 messages per request.
func BenchmarkRawPull(b *testing.B) {
	br := startBroker(b, Options{DefaultQueues: 1})
	fillBacklog(b, br, "raw", b.N)
	rc := dialRaw(b, br.BrokerAddr())
	b.ResetTimer()
	start := time.Now()
	var off, bytesRead int64
	for off < int64(b.N) {
		ext := pullExt("raw", 0, off, 0)
		ext["maxMsgNums"] = "256"
		resp := rc.call(reqPullMessage, ext, nil)
		if resp.Code != resSuccess {
			b.Fatalf("pull at %d: %d %s", off, resp.Code, resp.Remark)
		}
		off, _ = strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
		bytesRead += int64(len(resp.Body))
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(bytesRead)/el.Seconds()/(1<<20), "MiB/s")
}

// BenchmarkBacklogMemory stores b.N 1 KiB messages and reports heap growth
// per message: the log is on disk, only the index is in memory.
func BenchmarkBacklogMemory(b *testing.B) {
	br := startBroker(b, Options{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fillBacklog(b, br, "backlog", b.N)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heapB/msg")
}

// fillBacklog stores n 1 KiB messages directly, in batches of 128.
func fillBacklog(b *testing.B, br *Broker, topic string, n int) {
	b.Helper()
	td, err := br.store.ensureTopic(topic, br.opts.DefaultQueues)
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("y"), 1024)
	queues := td.queueCount()
	for i, q := 0, 0; i < n; q = (q + 1) % queues {
		k := min(128, n-i)
		msgs := make([]*message, k)
		for j := range msgs {
			msgs[j] = &message{topic: topic, queueID: int32(q), body: body, props: "UNIQ_KEY\x01" + strconv.Itoa(i+j) + "\x02"}
		}
		if _, err := br.store.put(td, q, msgs); err != nil {
			b.Fatal(err)
		}
		i += k
	}
}
