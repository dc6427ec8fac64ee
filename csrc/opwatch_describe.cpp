// graphscope._opwatch: an op call's inputs as ops._describe writes them (the shapes string),
// as a signature of what that string depends on (equal signatures describe alike, so a call
// seen before is not formatted again), and as the device memory its tensors span.

#include "opwatch.h"
#include "pyfloat.h"

namespace gs::opwatch {

namespace {

// torch.dtype names as Python prints them (str(dtype) without "torch."), appended to `out`.
void append_dtype(std::string& out, c10::ScalarType t) {
  using S = c10::ScalarType;
  switch (t) {  // the names that are not c10's lowercased
    case S::Byte: out += "uint8"; return;
    case S::Char: out += "int8"; return;
    case S::Short: out += "int16"; return;
    case S::Int: out += "int32"; return;
    case S::Long: out += "int64"; return;
    case S::Half: out += "float16"; return;
    case S::Float: out += "float32"; return;
    case S::Double: out += "float64"; return;
    case S::ComplexHalf: out += "complex32"; return;
    case S::ComplexFloat: out += "complex64"; return;
    case S::ComplexDouble: out += "complex128"; return;
    default:  // "Bool" -> "bool", "BFloat16" -> "bfloat16", "Float8_e4m3fn" -> "float8_e4m3fn"
      for (const char* c = c10::toString(t); *c; ++c)
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
}

void append_int(std::string& out, int64_t v) {
  char b[24];
  out.append(b, static_cast<size_t>(std::to_chars(b, b + sizeof(b), v).ptr - b));
}

void append_float(std::string& out, double v) {
  char b[40];
  out.append(b, gs::py_float_repr_to(v, b));
}

}  // namespace

void describe_tensor(std::string& out, const at::Tensor& t) {
  if (!t.defined()) {
    out += "None";
    return;
  }
  append_dtype(out, t.scalar_type());
  out += '[';
  bool first = true;
  for (auto d : t.sizes()) {
    if (!first) out += ',';
    first = false;
    append_int(out, d);
  }
  out += ']';
}

bool describe_value(std::string& out, const c10::IValue& v, bool skip_int);

// One item of a ", "-separated list: `out` as it was where _describe leaves the value out.
void describe_item(std::string& out, const c10::IValue& v, bool skip_int, bool& first) {
  const size_t mark = out.size();
  if (!first) out += ", ";
  if (describe_value(out, v, skip_int)) first = false; else out.resize(mark);
}

// One argument as ops._describe writes it, appended to `out`; false when _describe leaves it
// out (then nothing was appended).
bool describe_value(std::string& out, const c10::IValue& v, bool skip_int) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the arg parser wrapped: the dispatch mode gets the number back.
      switch (t.scalar_type()) {
        // A CPU scalar: read in place (t.item() would dispatch an op from inside a callback).
        case c10::ScalarType::Long:
          append_int(out, *static_cast<const int64_t*>(t.const_data_ptr()));
          return true;
        case c10::ScalarType::Double:
          append_float(out, *static_cast<const double*>(t.const_data_ptr()));
          return true;
        case c10::ScalarType::Bool:
          out += *static_cast<const bool*>(t.const_data_ptr()) ? "True" : "False";
          return true;
        default: return false;  // complex: _describe leaves it out
      }
    }
    describe_tensor(out, t);
  } else if (v.isNone()) {
    out += "None";
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    if (l.size() == 0) return false;
    out += '[';
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += ", ";
      describe_tensor(out, l.get(i));
    }
    out += ']';
  } else if (v.isList()) {  // List[Optional[Tensor]] and the like
    auto l = v.toListRef();
    if (l.empty() || !l[0].isTensor() || !l[0].toTensor().defined()) return false;
    out += '[';
    bool first = true;
    for (const auto& e : l) describe_item(out, e, false, first);
    out += ']';
  } else if (v.isBool()) {
    out += v.toBool() ? "True" : "False";
  } else if (v.isInt()) {
    if (skip_int) return false;
    append_int(out, v.toInt());
  } else if (v.isDouble()) {
    append_float(out, v.toDouble());
  } else {
    return false;
  }
  return true;
}

bool is_default(const c10::Argument& a, const c10::IValue& v) {
  const auto& d = a.default_value();
  if (!d) return false;
  if (d->isNone()) return v.isNone();
  if (v.isTensor() || v.isTensorList() || v.isNone()) return false;
  try {
    return *d == v;
  } catch (...) {
    return false;
  }
}

// How many leading inputs _describe looks at: the positional ones, trailing defaults dropped.
size_t described_end(const OpInfo& info, c10::ArrayRef<const c10::IValue> inputs) {
  const auto& args = info.schema->arguments();
  size_t end = std::min(info.kwarg_only_start, std::min(inputs.size(), args.size()));
  while (end > 0 && is_default(args[end - 1], inputs[end - 1])) --end;
  return end;
}

// The first `end` inputs as ops._describe writes them, appended to `out`.
void describe_inputs(std::string& out, const OpInfo& info,
                     c10::ArrayRef<const c10::IValue> inputs, size_t end) {
  bool first = true;
  for (size_t i = 0; i < end; ++i) describe_item(out, inputs[i], info.skip_int[i], first);
}

// A signature of what describe_value reads (raw bytes, appended to `k`): equal signatures
// describe alike, so a signature seen before needs no formatting.

void sign_tensor(std::string& k, const at::Tensor& t) {
  if (!t.defined()) {
    k += 'N';
    return;
  }
  k += 'T';
  put(k, t.scalar_type());
  const auto sizes = t.sizes();
  put(k, static_cast<uint32_t>(sizes.size()));
  k.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
}

void sign_value(std::string& k, const c10::IValue& v, bool skip_int) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number()) {
      k += 'W';  // one CPU scalar
      put(k, t.scalar_type());
      k.append(static_cast<const char*>(t.const_data_ptr()), t.element_size());
      return;
    }
    sign_tensor(k, t);
  } else if (v.isNone()) {
    k += 'n';
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    k += 'L';
    put(k, static_cast<uint32_t>(l.size()));
    for (size_t i = 0; i < l.size(); ++i) sign_tensor(k, l.get(i));
  } else if (v.isList()) {
    auto l = v.toListRef();
    k += 'G';
    put(k, static_cast<uint32_t>(l.size()));
    for (const auto& e : l) sign_value(k, e, false);
  } else if (v.isBool()) {
    k += v.toBool() ? 'B' : 'b';
  } else if (v.isInt()) {
    k += skip_int ? 's' : 'i';
    if (!skip_int) put(k, v.toInt());
  } else if (v.isDouble()) {
    k += 'd';
    put(k, v.toDouble());
  } else {
    k += 'o';  // describe_value leaves it out
  }
}

// The bytes a CUDA tensor's elements span: [lowest element, highest element + 1).
void add_range(std::vector<uint64_t>& out, const at::Tensor& t) {
  if (!t.defined() || !t.is_cuda() || t.is_sparse() || !t.has_storage() || t.numel() == 0)
    return;
  const auto base = reinterpret_cast<uint64_t>(t.const_data_ptr());
  if (base == 0) return;
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.size(d) - 1) * t.stride(d);
    (step < 0 ? lo : hi) += step;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  out.push_back(base + static_cast<uint64_t>(lo * item));
  out.push_back(base + static_cast<uint64_t>((hi + 1) * item));
}

void add_ranges(std::vector<uint64_t>& out, const c10::IValue& v) {
  if (v.isTensor()) {
    add_range(out, v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) add_range(out, t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) add_range(out, e.toTensor());
  }
}

int64_t new_call(const OpInfo& info, int64_t op, c10::ArrayRef<const c10::IValue> inputs) {
  CallRec c;
  c.op = op;
  const size_t n = std::min(inputs.size(), info.is_write.size());
  for (size_t i = 0; i < n; ++i) add_ranges(info.is_write[i] ? c.writes : c.reads, inputs[i]);
  std::lock_guard<std::mutex> g(st.mu);
  st.calls.push_back(std::move(c));
  return static_cast<int64_t>(st.calls.size()) - 1;
}

}  // namespace gs::opwatch
