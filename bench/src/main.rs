//! `bench`: the M7 load driver (C4). Not built yet: see issue "bench: the M7 load driver".

fn main() {
    eprintln!("bench: not implemented yet in this version of fencepost (tracked as the bench issue)");
    std::process::exit(2);
}
