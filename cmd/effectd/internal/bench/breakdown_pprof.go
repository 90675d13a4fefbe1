package bench

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// feature is one bucket of effectd serve's CPU profile: a sample goes to the
// first feature, walking its stack from the leaf to the root, one of whose
// prefixes starts a frame's function name. The cost of a feature's
// allocations and system calls is the feature's: runtime.mallocgc under pgx
// is pgx's.
type feature struct {
	name     string
	prefixes []string
}

// features are the buckets that name a library or a part of effectd. A
// sample under none of them falls to the runtime's buckets (runtimeBucket).
var features = []feature{
	{"signing (Standard Webhooks HMAC)", []string{"github.com/standard-webhooks/"}},
	{"JSON encode/decode", []string{"encoding/json.", "github.com/go-json-experiment/json"}},
	{"metrics (Prometheus)", []string{"github.com/prometheus/", "github.com/effectd/effectd/dispatcher.(*metrics)."}},
	{"tracing (OpenTelemetry)", []string{"go.opentelemetry.io/", "github.com/effectd/effectd/internal/tracing.",
		"github.com/effectd/effectd/dispatcher.startIntentSpan", "github.com/effectd/effectd/dispatcher.intentSpanStart", "github.com/effectd/effectd/dispatcher.intentAttrs",
		"github.com/effectd/effectd/dispatcher.(*Dispatcher).startAttempt", "github.com/effectd/effectd/dispatcher.(*Dispatcher).startChild",
		"github.com/effectd/effectd/dispatcher.traceparentOf", "github.com/effectd/effectd/dispatcher.producerSpan"}},
	{"logging (slog)", []string{"log/slog."}},
	{"pgx encode/decode and protocol", []string{"github.com/jackc/"}},
	{"HTTP client (net/http)", []string{"net/http.", "net/textproto.", "net/url."}},
	{"webhook provider (request, answer)", []string{"github.com/effectd/effectd/providers/"}},
	{"dispatcher loops (claim, call, complete)", []string{"github.com/effectd/effectd/dispatcher.", "github.com/effectd/effectd/internal/storage", "github.com/effectd/effectd/internal/query.", "github.com/effectd/effectd/statemachine."}},
	{"effectd, other", []string{"github.com/effectd/effectd/"}},
}

// Buckets of the samples under no feature.
const (
	bucketGC        = "GC and allocation (unattributed)"
	bucketSyscall   = "system calls and network poller (unattributed)"
	bucketScheduler = "Go scheduler"
	bucketOther     = "other runtime and standard library"
)

// runtimeBucket sorts a sample that no feature claims by its stack.
func runtimeBucket(funcs []string) string {
	has := func(prefixes ...string) bool {
		for _, f := range funcs {
			for _, p := range prefixes {
				if strings.HasPrefix(f, p) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcAssistAlloc",
		"runtime.mallocgc", "runtime.gcStart", "runtime.markroot", "runtime.gcDrain", "runtime.sweepone"):
		return bucketGC
	case has("syscall.", "internal/runtime/syscall.", "internal/poll.", "runtime.netpoll", "runtime.futex", "runtime.epollwait", "runtime.usleep", "runtime.nanotime"):
		return bucketSyscall
	case has("runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m", "runtime.goschedImpl", "runtime.mstart"):
		return bucketScheduler
	}
	return bucketOther
}

// profileSummary is a CPU profile's time by bucket, with two views across
// the buckets: the time in memory allocation and in system calls under any.
type profileSummary struct {
	total      time.Duration
	buckets    map[string]time.Duration
	allocation time.Duration // samples with runtime.mallocgc on their stack
	syscalls   time.Duration // samples with a system call on their stack
}

// summarizeProfile reads the CPU profile at path and sorts its samples into
// buckets.
func summarizeProfile(path string) (profileSummary, error) {
	s := profileSummary{buckets: map[string]time.Duration{}}
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpu = i
		}
	}
	if cpu < 0 {
		return s, fmt.Errorf("%s: no cpu nanoseconds sample type", path)
	}
	for _, sample := range p.Sample {
		d := time.Duration(sample.Value[cpu])
		funcs := stackFuncs(sample)
		s.total += d
		s.buckets[bucketOf(funcs)] += d
		for _, fn := range funcs {
			if fn == "runtime.mallocgc" {
				s.allocation += d
				break
			}
		}
		for _, fn := range funcs {
			if strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/runtime/syscall.") {
				s.syscalls += d
				break
			}
		}
	}
	return s, nil
}

// stackFuncs lists a sample's function names from the leaf to the root,
// inlined frames included (a location's first line is its innermost).
func stackFuncs(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				out = append(out, line.Function.Name)
			}
		}
	}
	return out
}

// bucketOf is the bucket of a stack listed from the leaf to the root.
func bucketOf(funcs []string) string {
	for _, fn := range funcs {
		for _, ft := range features {
			for _, p := range ft.prefixes {
				if strings.HasPrefix(fn, p) {
					return ft.name
				}
			}
		}
	}
	return runtimeBucket(funcs)
}

// bucketOrder is the order of the buckets in the table: the features, then
// the runtime's.
func bucketOrder() []string {
	var out []string
	for _, f := range features {
		out = append(out, f.name)
	}
	return append(out, bucketGC, bucketSyscall, bucketScheduler, bucketOther)
}
