package query

import (
	"strings"
	"testing"
)

// TestApprovalQueueReadsPendingOnly: the queue of pending approval requests
// reads approval_requests_pending, which holds only pending rows, however
// many decided requests are kept beside them.
func TestApprovalQueueReadsPendingOnly(t *testing.T) {
	plan := explain(t, []string{
		`INSERT INTO effectd.approval_requests (channel, action, reason, requester, expires_at, state, decider, decided_at, outcome)
		 SELECT 'refund', 'channel.policy', 'r', 'alice', now() + interval '1 day', 'approved', 'bob', now(), 'done'
		 FROM generate_series(1, 20000)`,
		`INSERT INTO effectd.approval_requests (channel, action, reason, requester, expires_at)
		 SELECT 'refund', 'channel.policy', 'r', 'alice', now() + interval '1 day' FROM generate_series(1, 3)`,
		`ANALYZE effectd.approval_requests`,
	}, approvalPending, []string{"refund"}, 0, 101)
	if !strings.Contains(plan, "approval_requests_pending") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("the pending queue does not read approval_requests_pending alone:\n%s", plan)
	}
}
