// pto-wsp emitted host driver support (written by `pto-wsp emit kernels`; do not edit).
// The module's tensors in memory, read from and written to numpy .npy files (version 1-3,
// little-endian, C order; element type and shape checked exactly), and a task's region copied
// out as a rows x cols row-major block (rows = product of all but the last size) and back.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pto_wsp_host {

struct TensorInfo {
    const char *name;
    const char *descr; // numpy descr, e.g. "<f4"
    int esize;         // bytes per element
    int ndim;
    int64_t shape[4];
};

inline std::string shape_text(const int64_t *shape, int ndim)
{
    std::string s = "(";
    for (int i = 0; i < ndim; ++i) {
        s += std::to_string(shape[i]);
        s += (ndim == 1 || i + 1 < ndim) ? "," : "";
        if (i + 1 < ndim) {
            s += " ";
        }
    }
    return s + ")";
}

struct Tensor {
    TensorInfo info;
    std::vector<uint8_t> bytes;
    int64_t elements() const
    {
        int64_t n = 1;
        for (int i = 0; i < info.ndim; ++i) {
            n *= info.shape[i];
        }
        return n;
    }
};

// Reads `path` into `t` (returns false if the file does not exist).
inline bool read_npy(const std::string &path, Tensor &t)
{
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        return false;
    }
    std::vector<char> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto fail = [&](const std::string &why) { throw std::runtime_error(path + ": " + why); };
    if (all.size() < 10 || std::memcmp(all.data(), "\x93NUMPY", 6) != 0) {
        fail("not a .npy file");
    }
    const int major = static_cast<unsigned char>(all[6]);
    size_t hlen = 0;
    size_t start = 0;
    if (major == 1) {
        hlen = static_cast<unsigned char>(all[8]) | (static_cast<unsigned char>(all[9]) << 8);
        start = 10;
    } else if (major == 2 || major == 3) {
        if (all.size() < 12) {
            fail("truncated header");
        }
        for (int i = 0; i < 4; ++i) {
            hlen |= static_cast<size_t>(static_cast<unsigned char>(all[8 + i])) << (8 * i);
        }
        start = 12;
    } else {
        fail("unsupported .npy version " + std::to_string(major));
    }
    if (start + hlen > all.size()) {
        fail("truncated header");
    }
    const std::string header(all.data() + start, hlen);
    const auto field = [&](const std::string &key) {
        const size_t k = header.find("'" + key + "'");
        if (k == std::string::npos) {
            fail("header has no '" + key + "'");
        }
        const size_t colon = header.find(':', k);
        size_t v = header.find_first_not_of(' ', colon + 1);
        return header.substr(v);
    };
    std::string descr = field("descr");
    descr = descr.substr(1, descr.find('\'', 1) - 1);
    if (descr != t.info.descr) {
        fail(std::string("tensor `") + t.info.name + "` holds " + t.info.descr + " elements, the file " + descr);
    }
    if (field("fortran_order").rfind("False", 0) != 0) {
        fail("Fortran order is not supported");
    }
    std::string shape = field("shape");
    shape = shape.substr(1, shape.find(')') - 1);
    std::vector<int64_t> dims;
    std::stringstream ss(shape);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.find_first_not_of(' ') != std::string::npos) {
            dims.push_back(std::stoll(item));
        }
    }
    bool same = static_cast<int>(dims.size()) == t.info.ndim;
    for (int i = 0; same && i < t.info.ndim; ++i) {
        same = dims[i] == t.info.shape[i];
    }
    if (!same) {
        fail(std::string("tensor `") + t.info.name + "` has shape " + shape_text(t.info.shape, t.info.ndim) +
             ", the file " + shape_text(dims.data(), static_cast<int>(dims.size())));
    }
    const size_t need = static_cast<size_t>(t.elements()) * t.info.esize;
    if (all.size() - start - hlen != need) {
        fail("expected " + std::to_string(need) + " data bytes, found " + std::to_string(all.size() - start - hlen));
    }
    std::memcpy(t.bytes.data(), all.data() + start + hlen, need);
    return true;
}

inline void write_npy(const std::string &path, const Tensor &t)
{
    std::string header = std::string("{'descr': '") + t.info.descr +
                         "', 'fortran_order': False, 'shape': " + shape_text(t.info.shape, t.info.ndim) + ", }";
    while ((10 + header.size() + 1) % 64 != 0) {
        header += ' ';
    }
    header += '\n';
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f.write("\x93NUMPY\x01\x00", 8);
        const char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
        f.write(len, 2);
        f.write(header.data(), static_cast<std::streamsize>(header.size()));
        f.write(reinterpret_cast<const char *>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
        if (!f) {
            throw std::runtime_error("cannot write " + tmp);
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        throw std::runtime_error("cannot rename " + tmp + " to " + path);
    }
}

// A task's region: the box start[d] +: size[d] of a tensor, as a rows x cols row-major block.
template <typename T>
struct Region {
    Tensor *tensor;
    int64_t start[4];
    int64_t size[4];
    int64_t rows = 1;
    int64_t cols = 1;
    std::vector<T> data;

    Region(Tensor &t, std::initializer_list<int64_t> s, std::initializer_list<int64_t> z) : tensor(&t)
    {
        int i = 0;
        for (int64_t v : s) {
            start[i++] = v;
        }
        i = 0;
        for (int64_t v : z) {
            size[i++] = v;
        }
        const int nd = t.info.ndim;
        cols = nd == 0 ? 1 : size[nd - 1];
        for (int d = 0; d + 1 < nd; ++d) {
            rows *= size[d];
        }
        data.resize(static_cast<size_t>(rows * cols));
        each_row([&](int64_t r, size_t off) {
            std::memcpy(data.data() + r * cols, t.bytes.data() + off, static_cast<size_t>(cols) * sizeof(T));
        });
    }

    // Copies the block back into the tensor (for out / inout regions).
    void store()
    {
        each_row([&](int64_t r, size_t off) {
            std::memcpy(tensor->bytes.data() + off, data.data() + r * cols, static_cast<size_t>(cols) * sizeof(T));
        });
    }

private:
    // Calls f(row index, byte offset of the row's first element in the tensor) for every row.
    template <typename F>
    void each_row(F f)
    {
        const int nd = tensor->info.ndim;
        int64_t idx[4] = {0, 0, 0, 0};
        for (int64_t r = 0; r < rows; ++r) {
            int64_t off = 0;
            for (int d = 0; d < nd; ++d) {
                off = off * tensor->info.shape[d] + start[d] + (d + 1 < nd ? idx[d] : 0);
            }
            f(r, static_cast<size_t>(off) * sizeof(T));
            for (int d = nd - 2; d >= 0; --d) {
                if (++idx[d] < size[d]) {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
};

// The message of status `code` from `table` (entry code - 1), `{i}` replaced by values[i].
inline std::string status_message(const char *const *table, size_t n, int64_t code, const int64_t *values)
{
    if (code < 1 || static_cast<size_t>(code) > n) {
        return "kernel check " + std::to_string(code) + " failed";
    }
    std::string out;
    for (const char *p = table[code - 1]; *p != 0; ++p) {
        if (p[0] == '{' && p[1] >= '0' && p[1] <= '6' && p[2] == '}') {
            out += std::to_string(values[p[1] - '0']);
            p += 2;
        } else {
            out += *p;
        }
    }
    return out;
}

} // namespace pto_wsp_host
