set terminal pngcairo size 900,600 noenhanced
set logscale xy
set grid
set key top left
set xlabel 'size (full buffer)'
set xtics ('8 B' 8, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864)
set output 'shm2heap_broadcast_busbw.png'
set title 'broadcast, 2 ranks, shared memory, the program's buffers from libcohort-heap.so (cohortrun --heap; co'
set ylabel 'bus bandwidth (GB/s)'
plot 'shm2heap_broadcast_cohort.dat' using 1:3 with linespoints title 'cohort'
set output 'shm2heap_broadcast_lat.png'
set title 'broadcast, 2 ranks, shared memory, the program's buffers from libcohort-heap.so (cohortrun --heap; co'
set ylabel 'time per op (us)'
plot 'shm2heap_broadcast_cohort.dat' using 1:2 with linespoints title 'cohort'
set output 'shm2heaposu_broadcast_busbw.png'
set title 'broadcast, 2 ranks, shared memory, libcohort-heap.so, OSU style'
set ylabel 'bus bandwidth (GB/s)'
plot 'shm2heaposu_broadcast_cohort.dat' using 1:3 with linespoints title 'cohort'
set output 'shm2heaposu_broadcast_lat.png'
set title 'broadcast, 2 ranks, shared memory, libcohort-heap.so, OSU style'
set ylabel 'time per op (us)'
plot 'shm2heaposu_broadcast_cohort.dat' using 1:2 with linespoints title 'cohort'
