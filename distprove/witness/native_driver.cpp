// distprove's long-lived driver for a circuit's native witness generator (`circom --c`).
//
// Linked with the objects of a `<name>_cpp/` folder in place of its main.o. One process computes
// many witnesses: it loads `<name>.dat` once, then reads requests on stdin and answers each on
// stdout, all little-endian binary:
//
//   hello (once):  "DPW1", u32 n8, n8 bytes prime, u32 witness size, u32 input values
//   request:       u32 records; per record u64 signal hash (FNV-1a of its name), u32 count,
//                  count values of n8 bytes (standard form, reduced modulo the prime)
//   answer:        u32 0, witness size values of n8 bytes (standard form: the .wtns's bytes)
//              or  u32 1, u32 record       (the record's hash names no input signal)
//              or  u32 2, u32 record, u32 size   (the record's count is not the signal's size)
//              or  u32 3, u32 given, u32 needed  (input values missing)
//
// End of input ends the process. The circuit prints its log() lines and its failed-assertion
// messages on stdout: the protocol goes out on a duplicate of the original stdout, and stdout
// itself is pointed at stderr, line buffered, so those lines reach the caller's stderr before an
// assertion aborts the process (the caller reads them there, one input at a time).
//
// Every request runs in the same Circom_CalcWit: its input bookkeeping is reset between
// requests instead of making a new context, whose destructor frees nothing (a context per input
// would leak the circuit's whole signal array every time). That bookkeeping is private in
// calcwit.hpp (the class's leading members), hence the access override around its include.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "circom.hpp"
// calcwit.hpp's standard headers are included above, so the override touches its class alone.
#define class struct
#define private public
#include "calcwit.hpp"
#undef private
#undef class

namespace {

int proto_fd = -1;

bool read_all(void *buf, size_t n) {
    char *p = static_cast<char *>(buf);
    while (n > 0) {
        ssize_t got = read(0, p, n);
        if (got <= 0) return false;
        p += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

void write_all(const void *buf, size_t n) {
    const char *p = static_cast<const char *>(buf);
    while (n > 0) {
        ssize_t put = write(proto_fd, p, n);
        if (put <= 0) _exit(3);  // the caller is gone
        p += put;
        n -= static_cast<size_t>(put);
    }
}

void write_u32(uint32_t v) { write_all(&v, 4); }

[[noreturn]] void die(const char *what, const std::string &path) {
    fprintf(stderr, "distprove driver: %s: %s\n", path.c_str(), what);
    exit(2);
}

// The circuit's tables from <name>.dat, in the order circom writes them: the input hash map, the
// witness-to-signal list, the constants, then the template and bus IO maps.
Circom_Circuit *load_circuit(const std::string &dat) {
    int fd = open(dat.c_str(), O_RDONLY);
    if (fd < 0) die("cannot open the circuit's .dat", dat);
    struct stat st;
    if (fstat(fd, &st) != 0) die("cannot stat the circuit's .dat", dat);
    size_t size = static_cast<size_t>(st.st_size);
    const u8 *data = static_cast<const u8 *>(mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0));
    close(fd);
    if (data == MAP_FAILED) die("cannot map the circuit's .dat", dat);

    size_t at = 0;
    auto take = [&](void *dst, size_t n) {
        if (at + n > size) die("the .dat is shorter than the circuit's tables", dat);
        memcpy(dst, data + at, n);
        at += n;
    };
    auto word = [&]() { u32 v; take(&v, 4); return v; };

    Circom_Circuit *c = new Circom_Circuit;
    c->InputHashMap = new HashSignalInfo[get_size_of_input_hashmap()];
    take(c->InputHashMap, get_size_of_input_hashmap() * sizeof(HashSignalInfo));
    c->witness2SignalList = new u64[get_size_of_witness()];
    take(c->witness2SignalList, get_size_of_witness() * sizeof(u64));
    c->circuitConstants = new FrElement[get_size_of_constants()];
    take(c->circuitConstants, get_size_of_constants() * sizeof(FrElement));
    c->busInsId2FieldInfo = nullptr;

    auto read_defs = [&](IOFieldDefPair &pair, u32 capacity) {
        pair.len = word();
        pair.defs = static_cast<IOFieldDef *>(calloc(capacity > pair.len ? capacity : pair.len, sizeof(IOFieldDef)));
        for (u32 j = 0; j < pair.len; j++) {
            IOFieldDef &d = pair.defs[j];
            d.offset = word();
            d.len = word();
            d.lengths = new u32[d.len];
            take(d.lengths, d.len * sizeof(u32));
            d.size = word();
            d.busId = word();
        }
    };
    u32 n_io = get_size_of_io_map();
    if (n_io > 0) {
        std::vector<u32> ids(n_io);
        take(ids.data(), n_io * sizeof(u32));
        for (u32 i = 0; i < n_io; i++) {
            IOFieldDefPair pair;
            read_defs(pair, 0);
            c->templateInsId2IOSignalInfo[ids[i]] = pair;
        }
        c->busInsId2FieldInfo = static_cast<IOFieldDefPair *>(calloc(get_size_of_bus_field_map(), sizeof(IOFieldDefPair)));
        for (u32 i = 0; i < get_size_of_bus_field_map(); i++) {
            read_defs(c->busInsId2FieldInfo[i], 10);  // circom's runtime reserves 10 fields a bus
        }
    }
    munmap(const_cast<u8 *>(data), size);
    return c;
}

// The input hash map's entry of a signal hash (circom's open addressing), or -1.
long find_input(const Circom_Circuit *c, u64 h) {
    u32 n = get_size_of_input_hashmap();
    if (n == 0) return -1;
    u32 start = static_cast<u32>(h % n);
    for (u32 k = 0; k < n; k++) {
        u32 pos = (start + k) % n;
        const HashSignalInfo &e = c->InputHashMap[pos];
        if (e.hash == h) return pos;
        if (e.signalid == 0) return -1;
    }
    return -1;
}

// A standard-form value as circom's own input reader stores it (Fr_str2element): a short
// element when it fits a signed int, else a long one in normal (not Montgomery) form.
void to_element(FrElement &e, const u64 *limbs) {
    bool small = limbs[0] <= 0x7fffffffULL;
    for (int i = 1; i < Fr_N64; i++) small = small && limbs[i] == 0;
    memset(&e, 0, sizeof e);
    if (small) {
        e.type = Fr_SHORT;
        e.shortVal = static_cast<int32_t>(limbs[0]);
    } else {
        e.type = Fr_LONG;
        memcpy(e.longVal, limbs, sizeof(FrRawElement));
    }
}

// Main's subcomponent tables: the circuit frees every other component's after running it.
void release_main(Circom_CalcWit *ctx) {
    Circom_Component &m = ctx->componentMemory[0];
    delete[] m.subcomponents;
    delete[] m.subcomponentsParallel;
    delete[] m.outputIsSet;
    delete[] m.mutexes;
    delete[] m.cvs;
    delete[] m.sbct;
    m.subcomponents = nullptr;
    m.subcomponentsParallel = nullptr;
    m.outputIsSet = nullptr;
    m.mutexes = nullptr;
    m.cvs = nullptr;
    m.sbct = nullptr;
}

struct Record {
    u64 hash;
    u32 count;
    long pos;
};

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <circuit>.dat  (requests on stdin, witnesses on stdout)\n", argv[0]);
        return 2;
    }
    proto_fd = dup(1);
    if (proto_fd < 0 || dup2(2, 1) < 0) return 2;
    setvbuf(stdout, nullptr, _IOLBF, 0);

    Circom_Circuit *circuit = load_circuit(argv[1]);
    Circom_CalcWit *ctx = new Circom_CalcWit(circuit);
    const u32 n8 = Fr_N64 * 8;
    const u32 n_wit = get_size_of_witness();
    const u32 n_in = get_main_input_signal_no();

    write_all("DPW1", 4);
    write_u32(n8);
    write_all(Fr_q.longVal, n8);
    write_u32(n_wit);
    write_u32(n_in);

    std::vector<u8> values;
    std::vector<u8> out(static_cast<size_t>(n_wit) * n8);
    std::vector<Record> records;
    bool ran_before = false;
    for (;;) {
        u32 n_rec;
        if (!read_all(&n_rec, 4)) return 0;
        records.clear();
        values.clear();
        for (u32 r = 0; r < n_rec; r++) {
            Record rec;
            if (!read_all(&rec.hash, 8) || !read_all(&rec.count, 4)) return 2;
            size_t at = values.size();
            values.resize(at + static_cast<size_t>(rec.count) * n8);
            if (!read_all(values.data() + at, static_cast<size_t>(rec.count) * n8)) return 2;
            rec.pos = find_input(circuit, rec.hash);
            records.push_back(rec);
        }
        u32 given = 0;
        bool bad = false;
        for (u32 r = 0; r < n_rec && !bad; r++) {
            if (records[r].pos < 0) {
                write_u32(1);
                write_u32(r);
                bad = true;
            } else if (records[r].count != circuit->InputHashMap[records[r].pos].signalsize) {
                write_u32(2);
                write_u32(r);
                write_u32(static_cast<u32>(circuit->InputHashMap[records[r].pos].signalsize));
                bad = true;
            }
            given += records[r].count;
        }
        if (bad) continue;
        if (given < n_in) {
            write_u32(3);
            write_u32(given);
            write_u32(n_in);
            continue;
        }

        if (ran_before) release_main(ctx);
        ran_before = true;
        for (u32 i = 0; i < n_in; i++) ctx->inputSignalAssigned[i] = false;
        ctx->inputSignalAssignedCounter = n_in;
        ctx->numThread = 0;
        if (n_in == 0) ctx->tryRunCircuit();
        const u8 *v = values.data();
        for (const Record &rec : records) {
            for (u32 i = 0; i < rec.count; i++, v += n8) {
                FrElement e;
                u64 limbs[Fr_N64];
                memcpy(limbs, v, n8);
                to_element(e, limbs);
                ctx->setInputSignal(rec.hash, i, e);  // the last value runs the circuit
            }
        }
        FrElement w;
        for (u32 i = 0; i < n_wit; i++) {
            ctx->getWitness(i, &w);
            Fr_toLongNormal(&w, &w);
            memcpy(out.data() + static_cast<size_t>(i) * n8, w.longVal, n8);
        }
        write_u32(0);
        write_all(out.data(), out.size());
    }
}
