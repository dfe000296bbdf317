package coord

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaveStrayOwnerKey writes unit's owner key for broker under broker's own
// registration lease — the key a hand-off whose delete failed leaves
// behind (etcd unreachable at that moment). No healthy broker writes this
// state; tests use it to set it up without etcd's client outside coord.
func LeaveStrayOwnerKey(ctx context.Context, endpoints []string, cluster, unit string, broker int32) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Context: ctx})
	if err != nil {
		return err
	}
	defer cl.Close()
	k := newKeys(cluster)
	reg, err := cl.Get(ctx, k.broker(broker))
	if err != nil {
		return err
	}
	if len(reg.Kvs) != 1 || reg.Kvs[0].Lease == 0 {
		return fmt.Errorf("broker %d is not registered under a lease", broker)
	}
	val, _ := json.Marshal(Owner{Broker: broker})
	_, err = cl.Put(ctx, k.owner(unit), string(val), clientv3.WithLease(clientv3.LeaseID(reg.Kvs[0].Lease)))
	return err
}
