package dispatcher_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
)

// TestNewRefusesInvalidConfig: a Config field no default can mend makes New
// return an error naming it (ErrInvalid), instead of panicking later or
// running with a ticker that cannot tick.
func TestNewRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: &scripted{}, Policy: policy.Default("webhook")}}
	for _, tc := range []struct {
		field string
		cfg   dispatcher.Config
	}{
		{"ClaimBatch", dispatcher.Config{ClaimBatch: -1}},
		{"ClaimBatch", dispatcher.Config{ClaimBatch: dispatcher.MaxClaimBatch + 1}},
		{"Completers", dispatcher.Config{Completers: -2}},
		{"PollInterval", dispatcher.Config{PollInterval: -time.Millisecond}},
		{"ReconcileInterval", dispatcher.Config{ReconcileInterval: -time.Second}},
		{"RefreshInterval", dispatcher.Config{RefreshInterval: -time.Second}},
		{"PruneInterval", dispatcher.Config{PruneInterval: -time.Minute}},
		{"DeliveryPollInterval", dispatcher.Config{DeliveryPollInterval: -time.Second}},
		{"SettleLease", dispatcher.Config{SettleLease: -time.Second}},
		{"WriteTimeout", dispatcher.Config{WriteTimeout: -time.Second}},
		{"Buckets", dispatcher.Config{Buckets: -1}},
		{"BucketLease", dispatcher.Config{BucketLease: -time.Second}},
		{"BucketLease", dispatcher.Config{Buckets: 4, BucketLease: time.Millisecond}},
	} {
		tc.cfg.Channels = chans
		var d *dispatcher.Dispatcher
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s: New panicked: %v", tc.field, p)
				}
			}()
			d, err = dispatcher.New(nil, tc.cfg)
		}()
		if d != nil || !errors.Is(err, dispatcher.ErrInvalid) || !strings.Contains(err.Error(), "Config."+tc.field+":") {
			t.Errorf("%s: New = %v, %v; want an ErrInvalid naming Config.%s", tc.field, d, err, tc.field)
		}
	}
}

// TestNewDefaults: zero Config fields take the Default constants, and
// SettleLease twice the longest lease plus WriteTimeout.
func TestNewDefaults(t *testing.T) {
	t.Parallel()
	pol := policy.Default("webhook")
	pol.Lease = policy.Duration(45 * time.Second)
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: &scripted{}, Policy: pol}}
	d, err := dispatcher.New(nil, dispatcher.Config{Channels: chans, PruneInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got := dispatcher.ConfigOf(d)
	got.Channels, got.Logger, got.Registerer = nil, nil, nil
	want := dispatcher.Config{
		ClaimBatch:           dispatcher.DefaultClaimBatch,
		Completers:           dispatcher.DefaultCompleters,
		PollInterval:         dispatcher.DefaultPollInterval,
		ReconcileInterval:    dispatcher.DefaultReconcileInterval,
		RefreshInterval:      dispatcher.DefaultRefreshInterval,
		PruneInterval:        time.Hour,
		DeliveryPollInterval: dispatcher.DefaultDeliveryPollInterval,
		SettleLease:          90*time.Second + dispatcher.DefaultWriteTimeout,
		WriteTimeout:         dispatcher.DefaultWriteTimeout,
		BucketLease:          dispatcher.DefaultBucketLease,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config after New:\n got %+v\nwant %+v", got, want)
	}
}
