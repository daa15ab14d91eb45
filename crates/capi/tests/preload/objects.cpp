// A C++ program for the preloaded recorder: std::vector, std::string, new and delete.
// Prints "tally news=N deletes=D" (its own calls of new/delete, vectors' and strings'
// allocations not counted) and "checksum=X".
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

struct Node {
    std::string name;
    std::vector<int> values;
};

static long news, deletes;

__attribute__((noinline)) static Node *make_node(int i) {
    news++;
    auto *n = new Node{"node number " + std::to_string(i) + " with a name too long for SSO", {}};
    for (int k = 0; k < i % 50; k++) n->values.push_back(k);
    return n;
}

int main() {
    std::vector<Node *> nodes;
    long sum = 0;
    for (int i = 0; i < 1000; i++) nodes.push_back(make_node(i));
    for (Node *n : nodes) {
        sum += (long)n->name.size() + (long)n->values.size();
        delete n;
        deletes++;
    }
    std::printf("tally news=%ld deletes=%ld\nchecksum=%ld\n", news, deletes, sum);
    return 0;
}
