#pragma once
// Pipeline stages across processes (placement issue, item 4). Every rank runs
// the same program on the same inputs (SPMD): embedding, self-conditioning,
// LM head and sampling are computed redundantly and identically on every
// rank (the embedding table is replicated read-only), while each layer and its
// KV cache live only on the rank that owns it. At a stage boundary the owner
// of layer i sends the hidden states to the owner of layer i+1; after the
// last layer of a decoder pass its owner broadcasts the final hidden states.
// Output is therefore bit-identical to a single process.
#include <vector>

#include "core/tensor.h"

namespace dgemma {

class StageTransport {
 public:
  virtual ~StageTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Owner rank of each layer (contiguous ranges in execution order).
  virtual int owner_of_layer(int layer) const = 0;
  // Point-to-point hand-off of a tensor whose shape the receiver already knows.
  virtual void send(int to, const Tensor& x) = 0;
  virtual void recv(int from, Tensor& x) = 0;
  // Broadcast from `root` to every rank (shape known everywhere).
  virtual void broadcast(int root, Tensor& x) = 0;
};

}  // namespace dgemma
